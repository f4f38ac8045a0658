//! The coordinator's round: read the table, then the shard Leases, then write the plan
//! against the version read (see the module docs for why in this order).

use super::TableStore;
use crate::sharding::LiveShards;

/// One round of the coordinator: the plan for the replicas alive now, written if it
/// changes the table. Returns whether it wrote. A conflict (someone wrote meanwhile) is an
/// error: the next round plans again from what is there.
pub(crate) async fn coordinate_once(
    tables: &TableStore,
    live: &LiveShards,
) -> Result<bool, kube::Error> {
    let read = tables.read().await?;
    // After the table: a replica that came back and checked in before the table was read
    // is seen alive here; one that checks in after makes the write below fail.
    let ring = live.observe().await?;
    let replicas: Vec<String> = ring.shards().map(str::to_owned).collect();
    let planned = read.table.plan(&replicas);
    if planned == read.table {
        return Ok(false);
    }
    tables.write(&read, &planned).await?;
    Ok(true)
}
