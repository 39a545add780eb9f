// Type declarations of longldp-client (docs/client-spec.md).

/** A protocol spec as the server publishes it: `{name, params}`. */
export interface ProtocolSpec {
  name: string;
  params?: Record<string, number | string | boolean | null>;
}

/** A protocol's device side, built from its spec (frozen). */
export interface Protocol {
  readonly name: string;
  /** one-byte wire id */
  readonly id: number;
  /** domain size */
  readonly k: number;
  /** true for memoizing (longitudinal) protocols */
  readonly memoizes: boolean;
  readonly p1: number;
  readonly q1: number;
  readonly p2: number;
  readonly q2: number;
  /** ε of one report and of one memo, rounded up */
  readonly eps1: number;
  readonly epsInf: number;
  readonly spec: { name: string; params: Record<string, unknown> };
}

/** Where a client keeps its secret and its state; every save replaces the state atomically. */
export interface Store {
  /** The device secret: loaded, or created once. */
  secret(): Promise<Uint8Array | CryptoKey>;
  /** The stored state (text), or null. */
  load(): Promise<string | null>;
  save(text: string): Promise<void>;
  /** Forget the state; keep the secret. */
  clear(): Promise<void>;
}

export interface RandomSource {
  bytes(n: number): Uint8Array | Promise<Uint8Array>;
}

export interface SpentBudget {
  reports: number;
  memos: number;
  epsilon: number;
}

export interface QueuedReport {
  id: Uint8Array;
  epoch: number;
  report: Uint8Array;
}

export interface OpenOptions {
  store: Store;
  spec?: ProtocolSpec;
  collection?: string;
  secret?: Uint8Array | CryptoKey;
  maxEpsilon?: number;
  queueLimit?: number;
  random?: RandomSource;
  warn?: (message: string) => void;
}

export class BudgetExceededError extends RangeError {}

export class DeviceClient {
  static open(options: OpenOptions): Promise<DeviceClient>;
  readonly proto: Protocol;
  readonly collection: string;
  readonly reports: number;
  readonly dropped: number;
  readonly maxEpsilon?: number;
  readonly queueLimit: number;
  /** Reports t, distinct memos d, ε = min(t·ε1, d·ε∞) (one-shot: t·ε1). */
  readonly spentBudget: SpentBudget;
  readonly queue: QueuedReport[];
  /** Randomize `value` for `epoch`, queue and save; resolves to the report id. */
  /** `plan`: the server's plan of the epoch, for a planned protocol (`{eps: b}` for the
   * LDP-IDS methods, `{round: "vote" | "estimate"}` for THRESH). Resolves to the report's id,
   * or null when a history-dependent protocol sends nothing at the epoch (CHANGES-TREE). */
  report(value: number | string, epoch: number, plan?: Record<string, unknown> | null): Promise<Uint8Array | null>;
  /** A history-dependent protocol's history (THRESH, CHANGES-TREE, DDRM), or null. */
  readonly history: Record<string, number | number[]> | null;
  /** Most ε spent in a window of w epochs containing `epoch`, with `extra` more at it (planned). */
  windowSpent(epoch: number, extra?: number): number;
  memo(value: number | string): Promise<number | Uint8Array>;
  memoId(value: number | string): string;
  budgetAfter(value: number | string): SpentBudget;
  batch(limit: number): { items: QueuedReport[]; data: Uint8Array };
  acknowledge(ids: Uint8Array[]): Promise<void>;
  /** The {device, credential} held on `server` (device identities), or null. */
  credential(server: string): { device: number; credential: string } | null;
  setCredential(server: string, device: number, credential: string): Promise<void>;
  forgetCredential(server: string): Promise<void>;
  drop(ids: Uint8Array[], reason: string): Promise<void>;
}

export class MemoryStore implements Store {
  secret(): Promise<Uint8Array>;
  load(): Promise<string | null>;
  save(text: string): Promise<void>;
  clear(): Promise<void>;
}

export class LocalStorageStore implements Store {
  constructor(prefix?: string, storage?: Storage);
  secret(): Promise<Uint8Array>;
  load(): Promise<string | null>;
  save(text: string): Promise<void>;
  clear(): Promise<void>;
}

/** IndexedDB; the secret is a non-extractable WebCrypto HMAC key. */
export class IndexedDBStore implements Store {
  constructor(name?: string, prefix?: string, indexedDB?: IDBFactory);
  secret(): Promise<CryptoKey>;
  load(): Promise<string | null>;
  save(text: string): Promise<void>;
  clear(): Promise<void>;
}

export interface UploadResult {
  acknowledged: number;
  dropped: number;
  attempts: number;
  remaining: number;
  refused: number | null;
  waits: number[];
}

export interface UploaderOptions {
  baseUrl: string;
  collection: string;
  /** the shared ingest token, or: */
  token?: string;
  /** the enrollment token: the device enrolls on first use and keeps its credential */
  enrollToken?: string;
  batchSize?: number;
  /** seconds per request */
  timeout?: number;
  maxAttempts?: number;
  baseDelay?: number;
  maxDelay?: number;
  sleep?: (seconds: number) => Promise<void>;
  rand?: () => number;
  fetch?: typeof fetch;
}

export class Uploader {
  constructor(options: UploaderOptions);
  readonly url: string;
  flush(client: DeviceClient): Promise<UploadResult>;
}

export function parseRetryAfter(value: string | null | undefined, now?: number): number | null;
export function fetchSpec(baseUrl: string, collection: string, token: string, fetchFn?: typeof fetch): Promise<ProtocolSpec>;
/** The server's plan of an epoch for a planned protocol (GET …/epochs/{epoch}/plan). */
export function fetchPlan(
  baseUrl: string, collection: string, epoch: number, token: string, fetchFn?: typeof fetch,
): Promise<{ collection: string; epoch: number; status: "report" | "none" | "pending"; plan: Record<string, unknown> | null }>;

/** What GET /v1/collections/{name} answers (docs/server.md, "Collections and tokens"). */
export interface CollectionInfo {
  name: string;
  protocol: ProtocolSpec;
  fingerprint: string;
  first_epoch: number;
  last_epoch: number | null;
  /** Length of an epoch in seconds: the collection has a wall clock (null: the app numbers epochs). */
  epoch_seconds: number | null;
  /** Unix time (seconds) at which first_epoch begins. */
  start_time: number | null;
  current_epoch: number | null;
  epoch_window: number;
  auth: "device" | "shared";
  /** Reports a device may make per epoch (default 1). */
  reports_per_epoch: number | null;
  [key: string]: unknown;
}
export function fetchCollection(baseUrl: string, collection: string, token: string, fetchFn?: typeof fetch): Promise<CollectionInfo>;
/** first_epoch + floor((nowMs/1000 − start_time)/epoch_seconds); RangeError without a clock. */
export function epochAt(info: Pick<CollectionInfo, "first_epoch" | "epoch_seconds" | "start_time">, nowMs?: number): number;
export function protocolFromSpec(spec: ProtocolSpec): Promise<Protocol>;
export const PROTOCOL_NAMES: readonly string[];
export function secretId(key: CryptoKey): Promise<string>;

export class HmacStream implements RandomSource {
  constructor(key: CryptoKey, context: Uint8Array);
  bytes(n: number): Promise<Uint8Array>;
}
export class CryptoSource implements RandomSource {
  bytes(n: number): Uint8Array;
}
export function floats(source: RandomSource, n: number): Promise<Float64Array>;
export function integers(source: RandomSource, low: number, high: number, n: number): Promise<number[]>;
export function header(proto: Protocol): Promise<Uint8Array>;
export function record(id: Uint8Array, epoch: number, report: Uint8Array): Uint8Array;
export function batch(items: QueuedReport[]): Uint8Array;
