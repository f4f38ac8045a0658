use std::cmp::Ordering;

use proptest::prelude::*;

use super::{ResourceVersion, compare};

/// KEP-5504's rule, written as the KEP states it, as the oracle: well-formed is digits
/// without a leading zero; the order is by length, then lexical.
fn kep_order(a: &str, b: &str) -> Option<Ordering> {
    let well_formed =
        |s: &str| !s.is_empty() && !s.starts_with('0') && s.bytes().all(|c| c.is_ascii_digit());
    (well_formed(a) && well_formed(b)).then(|| a.len().cmp(&b.len()).then(a.cmp(b)))
}

fn fits_128_bits(s: &str) -> bool {
    s.parse::<u128>().is_ok()
}

#[test]
fn the_edges_of_well_formed() {
    for text in [
        "1",
        "9",
        "10",
        "18446744073709551616",
        &u128::MAX.to_string(),
    ] {
        let parsed: ResourceVersion = text.parse().unwrap();
        assert_eq!(parsed.to_string(), text, "prints as written");
    }
    for text in [
        "",
        "0",
        "00",
        "007",
        "-1",
        "+1",
        " 1",
        "1 ",
        "1.0",
        "1e3",
        "0x10",
        "abc",
        "١٢",
        "340282366920938463463374607431768211456", // u128::MAX + 1
        "1000000000000000000000000000000000000000", // 40 digits
    ] {
        let err = text.parse::<ResourceVersion>().unwrap_err();
        assert_eq!(err.0, text);
        assert!(err.to_string().contains("not comparable"), "{err}");
    }
}

#[test]
fn numbers_past_64_bits_order_as_numbers() {
    // A u64 parse got these wrong: both failed, so neither was newer.
    assert_eq!(
        compare("18446744073709551616", "18446744073709551617"),
        Some(Ordering::Less)
    );
    assert_eq!(
        compare("99999999999999999999", "100000000000000000000"),
        Some(Ordering::Less)
    );
    assert_eq!(
        compare("18446744073709551615", "18446744073709551616"),
        Some(Ordering::Less)
    );
}

#[test]
fn the_successor_is_the_next_number() {
    let v: ResourceVersion = "18446744073709551615".parse().unwrap();
    assert_eq!(v.successor().unwrap().to_string(), "18446744073709551616");
    let last: ResourceVersion = u128::MAX.to_string().parse().unwrap();
    assert_eq!(last.successor(), None);
}

proptest! {
    /// Any two numbers within 128 bits: the type's order is KEP-5504's order of their text.
    #[test]
    fn the_order_is_the_keps(a in 1..=u128::MAX, b in 1..=u128::MAX) {
        let (ta, tb) = (a.to_string(), b.to_string());
        let (pa, pb): (ResourceVersion, ResourceVersion) = (ta.parse().unwrap(), tb.parse().unwrap());
        prop_assert_eq!(Some(pa.cmp(&pb)), kep_order(&ta, &tb));
        prop_assert_eq!(compare(&ta, &tb), Some(a.cmp(&b)));
    }

    /// Any text of digits (leading zeros and lengths past 39 included): comparable exactly
    /// when the KEP says so and it fits in 128 bits, and then in the KEP's order.
    #[test]
    fn any_digits_follow_the_kep(a in "[0-9]{0,42}", b in "[0-9]{0,42}") {
        let comparable = |s: &str| kep_order(s, s).is_some() && fits_128_bits(s);
        prop_assert_eq!(a.parse::<ResourceVersion>().is_ok(), comparable(&a));
        let expected = (comparable(&a) && comparable(&b)).then(|| kep_order(&a, &b)).flatten();
        prop_assert_eq!(compare(&a, &b), expected);
    }
}
