// Types for hilo-ids. Every ID, bound and count is a BigInt.
export type Range = [first: bigint, last: bigint];
export interface Queryable {
  query(config: { text: string; values?: unknown[] }): Promise<{ rows: any[] }>;
}
export function take(db: Queryable, seq: string, n: bigint | number, options?: { partial?: boolean }): Promise<Range[]>;
export function push(db: Queryable, seq: string, ranges: Iterable<[bigint | number, bigint | number]>): Promise<bigint>;
export function nextval(db: Queryable, seq: string): Promise<bigint>;
export function count(ranges: Iterable<Range>): bigint;
export class IdSetClosedError extends Error {}
/** An IdSet on a client refused to take or push inside a transaction open on that client. */
export class IdSetInTransactionError extends Error {}
export class IdSet {
  static open(db: Queryable, seq: string, options?: { batchSize?: number; lowWater?: number }): Promise<IdSet>;
  readonly seq: string;
  readonly batchSize: number;
  readonly lowWater: number;
  readonly remaining: number;
  readonly refills: number;
  next(): Promise<bigint>;
  tryNext(): bigint | undefined;
  ranges(): Range[];
  close(): Promise<void>;
}
/** The rows, each with an ID from ids under key (default 'id') unless it has one. */
export function assignIds<T extends Record<string, unknown>>(ids: IdSet, rows: Iterable<T>, key?: string): Promise<(T & Record<string, bigint>)[]>;
/** SQL for a column DEFAULT drawing from seq on the server: hilo_nextval('seq'). */
export function nextvalSql(seq: string): string;
/** The package's version: the extension's. */
export const version: string;
