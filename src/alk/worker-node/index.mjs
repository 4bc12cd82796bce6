// The SDK as an ES module, for a package that installs alk-worker: the same objects as
// index.js, so that both forms share one session with alk.
import sdk from "./index.js";

export const {
  PROTOCOL_VERSION, CHANNELS, ProtocolError, Start, Worker, packagePaths, packageVersion,
  hello, ready, start, emit, toolCall, toolResult, fault, scriptExhausted, result,
} = sdk;
export default sdk;
