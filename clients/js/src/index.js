// longldp-client: the device side of longldp for browsers and Node ≥ 20 (docs/client-spec.md).
export { DeviceClient, BudgetExceededError, secretId } from "./client.js";
export { protocolFromSpec, PROTOCOL_NAMES } from "./protocols.js";
export { MemoryStore, LocalStorageStore, IndexedDBStore } from "./stores.js";
export { Uploader, parseRetryAfter, fetchPlan, fetchSpec, fetchCollection, epochAt } from "./upload.js";
export { HmacStream, CryptoSource } from "./random.js";
export { floats, integers } from "./common.js";
export { header, record, batch } from "./wire.js";
