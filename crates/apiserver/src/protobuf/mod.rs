//! Protocol buffers: the wire primitives shared by our protobuf encoders.

pub(crate) mod wire;
