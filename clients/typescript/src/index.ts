// cordon's client for Node: the protocol's types (generated from
// docs/protocol.schema.json), a client over a Unix socket or a child's
// stdio, and an adapter with a harness executor's shape.
export * from "./client.js";
export * from "./errors.js";
export * from "./executor.js";
export type * from "./protocol.js";
