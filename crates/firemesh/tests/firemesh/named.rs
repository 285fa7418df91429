//! The library's choices by name: every name reads back as its value; an unknown one is
//! refused with the list.

use firemesh::mesh::MeshKind;
use firemesh::named::Named;
use firemesh::optim::{OptimizerKind, ScheduleKind};
use firemesh::Precision;

fn round_trips<T: Named + std::fmt::Debug + std::str::FromStr + std::fmt::Display>() {
    for &v in T::ALL {
        assert_eq!(T::from_name(&v.to_string()), Ok(v));
        assert!(v.to_string().parse::<T>().is_ok_and(|p| p == v));
    }
}

#[test]
fn every_name_reads_back_as_its_value() {
    round_trips::<Precision>();
    round_trips::<MeshKind>();
    round_trips::<OptimizerKind>();
    round_trips::<ScheduleKind>();
    assert_eq!(MeshKind::ALL.len(), 4);
}

#[test]
fn an_unknown_name_lists_the_known_ones() {
    let err = Precision::from_name("fp8").unwrap_err();
    assert_eq!(
        err.to_string(),
        "\"fp8\" is no precision; one of: f32, bf16, f16"
    );
    assert!("Adam".parse::<OptimizerKind>().is_err());
}
