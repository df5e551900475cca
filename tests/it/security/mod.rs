//! The attacks SECURITY.md names, each performed against the real stack, each asserting that
//! the boundary held and that the legitimate use next to it still works.

mod dos;
mod egress;
mod isolation;
mod links;
mod preview;
mod proxy;
mod push;
mod sandbox;
mod snapshot;
