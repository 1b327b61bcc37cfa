// The error every operation throws lives in TilepackCore (a sync in TilepackRemote throws it too);
// `import TilepackOperations` names it as before.
@_exported import struct TilepackCore.OperationError
