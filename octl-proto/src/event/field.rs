//! Reading one field of an event's `data`, with an error that names the field and the form
//! it accepts; and [`declare_payloads!`], which turns a list of payload declarations into
//! structs, their [`Payload`] impls and [`KNOWN_TYPES`](super::KNOWN_TYPES).
//!
//! Payloads are read field by field rather than through serde's `Deserialize`: serde's errors
//! do not say which field was wrong, and a log written by any version must read back with the
//! rules it was written under (`null` is the same as absent, unknown keys are ignored).

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::error::AppError;
use crate::state::RunKind;

/// Why a field could not be read: its accepted form, as in "a string".
pub enum Bad {
    Missing(&'static str),
    Invalid(&'static str),
}

impl Bad {
    /// The error for `data.<key>` of an event of type `ty`.
    pub fn error(self, key: &str, ty: &str) -> AppError {
        match self {
            Bad::Missing(form) => {
                AppError::invalid(format!("missing data.{key}: {ty} needs {key}, {form}"))
            }
            Bad::Invalid(form) => {
                AppError::invalid(format!("invalid data.{key}: {form} is accepted"))
            }
        }
    }
}

/// A type a payload field can have. `None` is an absent key.
pub trait Field: Sized {
    /// Whether `null` is a value of its own (see [`Nullable`]) rather than "absent".
    const TAKES_NULL: bool = false;
    fn decode(v: Option<&Value>) -> Result<Self, Bad>;
}

fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

macro_rules! scalar {
    ($t:ty, $form:literal, $get:expr) => {
        impl Field for $t {
            fn decode(v: Option<&Value>) -> Result<Self, Bad> {
                let v = present(v).ok_or(Bad::Missing($form))?;
                $get(v).ok_or(Bad::Invalid($form))
            }
        }
    };
}

scalar!(String, "a string", |v: &Value| v
    .as_str()
    .map(str::to_string));
scalar!(i64, "an integer", Value::as_i64);
scalar!(u64, "a non-negative integer", Value::as_u64);
scalar!(u32, "a non-negative integer", |v: &Value| v
    .as_u64()
    .and_then(|n| u32::try_from(n).ok()));
scalar!(f64, "a number", Value::as_f64);
scalar!(bool, "a boolean", Value::as_bool);
scalar!(Map<String, Value>, "an object", |v: &Value| v.as_object().cloned());
scalar!(
    RunKind,
    "one of generic, spinoff, code, fanout, orchestrate",
    |v: &Value| v.as_str().and_then(RunKind::parse)
);

/// An agent's outcome: any object. Its known keys are typed when they have their type; an
/// object where one does not (a generic run's client may append anything) is kept whole in
/// `other`, so every log written before the type existed still reads and writes back as it was.
impl Field for crate::state::Outcome {
    fn decode(v: Option<&Value>) -> Result<Self, Bad> {
        const FORM: &str = "an object";
        let map = present(v).ok_or(Bad::Missing(FORM))?;
        let map = map.as_object().ok_or(Bad::Invalid(FORM))?;
        let typed: crate::state::Outcome =
            serde_json::from_value(Value::Object(map.clone())).unwrap_or_default();
        // A known key of another type reads as absent: then the whole object is kept instead.
        let kept = serde_json::to_value(&typed)
            .ok()
            .and_then(|v| v.as_object().map(|o| o.len() == map.len()))
            .unwrap_or(false);
        Ok(if kept {
            typed
        } else {
            crate::state::Outcome {
                other: map.clone(),
                ..Default::default()
            }
        })
    }
}

/// Each list read as a list of strings; a list absent is empty, other keys are ignored.
impl Field for crate::rules::PermissionRules {
    fn decode(v: Option<&Value>) -> Result<Self, Bad> {
        const FORM: &str = "an object of allow, ask and deny lists of strings";
        let map = present(v).ok_or(Bad::Missing(FORM))?;
        let map = map.as_object().ok_or(Bad::Invalid(FORM))?;
        let list = |k: &str| Vec::<String>::decode(map.get(k)).map_err(|_| Bad::Invalid(FORM));
        Ok(crate::rules::PermissionRules {
            allow: list("allow")?,
            ask: list("ask")?,
            deny: list("deny")?,
        })
    }
}

/// An absent list is an empty one.
impl Field for crate::state::ReviewWay {
    fn decode(v: Option<&Value>) -> Result<Self, Bad> {
        const FORM: &str = "\"typed\", \"resumed\" or \"attempt\"";
        let s = present(v).ok_or(Bad::Missing(FORM))?;
        crate::state::ReviewWay::ALL
            .into_iter()
            .find(|w| s.as_str() == Some(w.as_str()))
            .ok_or(Bad::Invalid(FORM))
    }
}

impl Field for crate::sandbox::SandboxKind {
    fn decode(v: Option<&Value>) -> Result<Self, Bad> {
        const FORM: &str = "\"bwrap\" or \"none\"";
        let s = present(v).ok_or(Bad::Missing(FORM))?;
        crate::sandbox::SandboxKind::ALL
            .into_iter()
            .find(|k| s.as_str() == Some(k.as_str()))
            .ok_or(Bad::Invalid(FORM))
    }
}

impl Field for Vec<String> {
    fn decode(v: Option<&Value>) -> Result<Self, Bad> {
        const FORM: &str = "an array of strings";
        match present(v) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| i.as_str().map(str::to_string).ok_or(Bad::Invalid(FORM)))
                .collect(),
            Some(_) => Err(Bad::Invalid(FORM)),
        }
    }
}

/// Absent and `null` are `None`.
impl<T: Field> Field for Option<T> {
    fn decode(v: Option<&Value>) -> Result<Self, Bad> {
        match v {
            None => Ok(None),
            Some(Value::Null) if !T::TAKES_NULL => Ok(None),
            Some(v) => T::decode(Some(v)).map(Some),
        }
    }
}

/// A field the daemon writes as `null` when it has no value, and leaves out where it does not
/// apply (the exit status of a killed agent is `null`; an agent's own report has none). In a
/// payload it is `Option<Nullable<T>>` with `skip_serializing_if = "Option::is_none"`, so
/// absent, `null` and a value each write back as they were read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Nullable<T>(pub Option<T>);

impl<T: Field> Field for Nullable<T> {
    const TAKES_NULL: bool = true;
    fn decode(v: Option<&Value>) -> Result<Self, Bad> {
        match present(v) {
            None => Ok(Nullable(None)),
            v => T::decode(v).map(|t| Nullable(Some(t))),
        }
    }
}

impl<T: Serialize> Serialize for Nullable<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<T> From<Option<T>> for Nullable<T> {
    fn from(v: Option<T>) -> Self {
        Nullable(v)
    }
}

/// The value inside `Option<Nullable<T>>`, whether absent or `null`.
pub fn flat<T: Clone>(v: &Option<Nullable<T>>) -> Option<T> {
    v.as_ref().and_then(|n| n.0.clone())
}

/// What a payload keeps of the keys it does not name: nothing for the daemon's own events, the
/// rest of the object for events a client may append (`Map`), the run's settings for
/// `run.created`.
pub trait Rest: Sized {
    fn from_rest(rest: Map<String, Value>) -> Result<Self, AppError>;
}

impl Rest for Map<String, Value> {
    fn from_rest(rest: Map<String, Value>) -> Result<Self, AppError> {
        Ok(rest)
    }
}

/// Declares each event type's payload: a struct of its `data` fields (serde attributes as
/// usual decide how each is written), bound to its type name. Optionally `..name: Type` keeps
/// the keys not named, flattened back in when written.
///
/// ```text
/// /// `node.blocked`: a dependency cannot merge.
/// NodeBlocked = "node.blocked" {
///     #[serde(skip_serializing_if = "Option::is_none")]
///     reason: Option<String>,
/// }
/// ```
#[macro_export]
#[doc(hidden)]
macro_rules! declare_payloads {
    ($(
        $(#[$meta:meta])*
        $name:ident = $ty:literal {
            $( $(#[$fmeta:meta])* $field:ident : $fty:ty, )*
            $( ..$rest:ident : $rty:ty $(,)? )?
        }
    )*) => {
        $(
            $(#[$meta])*
            #[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
            pub struct $name {
                $( $(#[$fmeta])* pub $field: $fty, )*
                $( #[serde(flatten)] pub $rest: $rty, )?
            }

            impl $crate::event::Payload for $name {
                const TYPE: &'static str = $ty;

                #[allow(unused_variables)]
                fn from_data(data: &serde_json::Map<String, serde_json::Value>) -> Result<Self, $crate::AppError> {
                    #[allow(unused_imports)]
                    use $crate::event::field::{Field, Rest};
                    let _named: &[&str] = &[$(stringify!($field)),*];
                    Ok($name {
                        $( $field: Field::decode(data.get(stringify!($field)))
                            .map_err(|b| b.error(stringify!($field), $ty))?, )*
                        $( $rest: Rest::from_rest(data.iter()
                            .filter(|(k, _)| !_named.contains(&k.as_str()))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect())?, )?
                    })
                }
            }
        )*

        /// Every event type the system knows, from the payload declarations; custom ones are
        /// `x.<name>`.
        pub const KNOWN_TYPES: &[&str] = &[$($ty),*];

        /// Reads `data` as the payload of type `kind` and writes it back, as the daemon would
        /// write it; `None` for a type without a payload (`x.<name>`).
        pub fn retyped(
            kind: &str,
            data: &serde_json::Map<String, serde_json::Value>,
        ) -> Option<Result<serde_json::Map<String, serde_json::Value>, $crate::AppError>> {
            use $crate::event::Payload;
            match kind {
                $( $ty => Some($name::from_data(data).map(|p| p.to_data())), )*
                _ => None,
            }
        }
    };
}
