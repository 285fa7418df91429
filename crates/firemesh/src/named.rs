//! The library's choices read and written by name (`bf16`, `adamw`, `cosine`, `auto`): what a
//! command line, a config file or a report uses, without the library knowing which.

/// A choice among a fixed set of values, each with one name.
pub trait Named: Sized + Copy + PartialEq + 'static {
    /// What the value chooses, for errors ("precision").
    const WHAT: &'static str;
    /// Every value, in the order names are listed.
    const ALL: &'static [Self];
    fn name(self) -> &'static str;

    /// The value called `name`, or why there is none.
    fn from_name(name: &str) -> Result<Self, UnknownName> {
        Self::ALL
            .iter()
            .copied()
            .find(|v| v.name() == name)
            .ok_or_else(|| UnknownName {
                what: Self::WHAT,
                given: name.to_string(),
                names: Self::ALL.iter().map(|v| v.name()).collect(),
            })
    }
}

/// A name that is not one of a [`Named`] choice's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{given:?} is no {what}; one of: {}", names.join(", "))]
pub struct UnknownName {
    pub what: &'static str,
    pub given: String,
    pub names: Vec<&'static str>,
}

/// `Display` and `FromStr` of a [`Named`] type, by its names.
macro_rules! by_name {
    ($t:ty) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($crate::named::Named::name(*self))
            }
        }

        impl std::str::FromStr for $t {
            type Err = $crate::named::UnknownName;
            fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
                <$t as $crate::named::Named>::from_name(s)
            }
        }
    };
}
pub(crate) use by_name;
