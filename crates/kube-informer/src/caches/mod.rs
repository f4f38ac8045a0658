//! client-go's smaller caches (feature `client-go-caches`), kept for the same uses (nothing
//! in the informer core needs them): [`MutationCache`](mutation::MutationCache) (the cache
//! overlaid with this process's own writes until the informer catches up),
//! [`ExpirationCache`](expiration::ExpirationCache) (entries with a time to live),
//! [`UndeltaStore`](undelta::UndeltaStore) (the whole state handed to a callback on every
//! change) and [`Heap`](heap::Heap) (objects by key, popped in priority order).

pub mod expiration;
pub mod heap;
pub mod mutation;
pub mod undelta;
