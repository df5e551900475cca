//! The grammar of a JSON number, a byte at a time.

/// Where a number is: after its sign, its leading zero, in its integer digits, after its
/// point, in its fraction, after its `e`, after the exponent's sign, in the exponent's digits.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpInt,
}

impl Num {
    /// The state after `b`, or `None` when `b` is not part of the number.
    pub(super) fn next(self, b: u8) -> Option<Num> {
        use Num::*;
        Some(match (self, b) {
            (Minus, b'0') => Zero,
            (Minus, b'1'..=b'9') => Int,
            (Int, b'0'..=b'9') => Int,
            (Zero | Int, b'.') => Dot,
            (Dot | Frac, b'0'..=b'9') => Frac,
            (Zero | Int | Frac, b'e' | b'E') => Exp,
            (Exp, b'+' | b'-') => ExpSign,
            (Exp | ExpSign | ExpInt, b'0'..=b'9') => ExpInt,
            _ => return None,
        })
    }

    pub(super) fn complete(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::ExpInt)
    }
}
