//! Enums whose names are their snake_case serde names, shown, stored and parsed the same way:
//! `named_enum!` derives serde and strum together so the names are written once.

/// Declares a fieldless enum named by its snake_case variants, with `as_str` and `FromStr`
/// (strum) matching serde, and `VARIANTS`. Extra attributes (docs, more derives) pass through.
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$variant_meta:meta])* $variant:ident,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Debug,
            Clone,
            Copy,
            PartialEq,
            Eq,
            serde::Serialize,
            serde::Deserialize,
            strum::IntoStaticStr,
            strum::EnumString,
            strum::VariantArray,
        )]
        #[serde(rename_all = "snake_case")]
        #[strum(serialize_all = "snake_case")]
        $vis enum $name {
            $($(#[$variant_meta])* $variant,)*
        }

        impl $name {
            /// The name stored and shown (the serde name).
            pub fn as_str(self) -> &'static str {
                self.into()
            }
        }
    };
}
pub(crate) use named_enum;
