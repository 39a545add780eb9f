export class Uploader {}; export function parseRetryAfter(){}
