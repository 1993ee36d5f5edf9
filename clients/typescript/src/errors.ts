// The errors `cordon serve` answers with: each a JSON-RPC code and a
// stable name in `error.data.code` (docs/protocol.md, "Errors"; the tests
// check this table against that one).

/** Every stable error name, by its JSON-RPC code; `CLOSED` is the client's own. */
export const ERROR_CODES = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  SANDBOX_UNAVAILABLE: -32001,
  POLICY_FAILED: -32002,
  WORKDIR: -32003,
  SPAWN_FAILED: -32004,
  UNKNOWN_TASK: -32005,
  ABORTED: -32006,
  POLICY_DENIED: -32007,
  APPROVAL_REQUIRED: -32008,
  BUSY: -32009,
  FORBIDDEN: -32010,
  UNKNOWN_SPILL: -32011,
  UNKNOWN_ATTACH_TOKEN: -32012,
  AUDIT_UNAVAILABLE: -32013,
  INTERNAL_ERROR: -32603,
  CLOSED: -32603,
} as const;

/** A stable error name. */
export type ErrorName = keyof typeof ERROR_CODES;

/** A JSON-RPC error reply (or `CLOSED`: the connection is gone). */
export class CordonError extends Error {
  /** The JSON-RPC code. */
  readonly code: number;
  /** The stable name (`data.code`), e.g. `SANDBOX_UNAVAILABLE`. */
  readonly errorName: ErrorName;
  /** Structured detail, always with `code`. */
  readonly data: { code: ErrorName; [key: string]: unknown };

  constructor(code: number, message: string, data: { code: ErrorName; [key: string]: unknown }) {
    super(message);
    this.name = "CordonError";
    this.code = code;
    this.errorName = data.code;
    this.data = data;
  }

  /** The connection is gone (`CLOSED`). */
  static closed(message: string): CordonError {
    return new CordonError(ERROR_CODES.CLOSED, message, { code: "CLOSED" });
  }
}
