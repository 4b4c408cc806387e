from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SessionStatus(_message.Message):
    __slots__ = ("sessionId", "peerPid", "buffers", "bufferBytes", "preparedModels", "peerUid", "preparedModelNames", "runMailbox", "mailboxRuns")
    SESSIONID_FIELD_NUMBER: _ClassVar[int]
    PEERPID_FIELD_NUMBER: _ClassVar[int]
    BUFFERS_FIELD_NUMBER: _ClassVar[int]
    BUFFERBYTES_FIELD_NUMBER: _ClassVar[int]
    PREPAREDMODELS_FIELD_NUMBER: _ClassVar[int]
    PEERUID_FIELD_NUMBER: _ClassVar[int]
    PREPAREDMODELNAMES_FIELD_NUMBER: _ClassVar[int]
    RUNMAILBOX_FIELD_NUMBER: _ClassVar[int]
    MAILBOXRUNS_FIELD_NUMBER: _ClassVar[int]
    sessionId: int
    peerPid: int
    buffers: int
    bufferBytes: int
    preparedModels: int
    peerUid: int
    preparedModelNames: _containers.RepeatedScalarFieldContainer[str]
    runMailbox: bool
    mailboxRuns: int
    def __init__(self, sessionId: _Optional[int] = ..., peerPid: _Optional[int] = ..., buffers: _Optional[int] = ..., bufferBytes: _Optional[int] = ..., preparedModels: _Optional[int] = ..., peerUid: _Optional[int] = ..., preparedModelNames: _Optional[_Iterable[str]] = ..., runMailbox: _Optional[bool] = ..., mailboxRuns: _Optional[int] = ...) -> None: ...

class UidStatus(_message.Message):
    __slots__ = ("uid", "sessions", "sharedMemoryBytes")
    UID_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    SHAREDMEMORYBYTES_FIELD_NUMBER: _ClassVar[int]
    uid: int
    sessions: int
    sharedMemoryBytes: int
    def __init__(self, uid: _Optional[int] = ..., sessions: _Optional[int] = ..., sharedMemoryBytes: _Optional[int] = ...) -> None: ...

class FaultConfig(_message.Message):
    __slots__ = ("runDelayMs", "runHang", "exitOnRun", "exitOnPrepare", "exitOnRunProbability", "exitOnExportCache", "deviceStatus", "deviceBusy", "corruptExportedCache")
    RUNDELAYMS_FIELD_NUMBER: _ClassVar[int]
    RUNHANG_FIELD_NUMBER: _ClassVar[int]
    EXITONRUN_FIELD_NUMBER: _ClassVar[int]
    EXITONPREPARE_FIELD_NUMBER: _ClassVar[int]
    EXITONRUNPROBABILITY_FIELD_NUMBER: _ClassVar[int]
    EXITONEXPORTCACHE_FIELD_NUMBER: _ClassVar[int]
    DEVICESTATUS_FIELD_NUMBER: _ClassVar[int]
    DEVICEBUSY_FIELD_NUMBER: _ClassVar[int]
    CORRUPTEXPORTEDCACHE_FIELD_NUMBER: _ClassVar[int]
    runDelayMs: int
    runHang: bool
    exitOnRun: int
    exitOnPrepare: int
    exitOnRunProbability: float
    exitOnExportCache: bool
    deviceStatus: int
    deviceBusy: bool
    corruptExportedCache: bool
    def __init__(self, runDelayMs: _Optional[int] = ..., runHang: _Optional[bool] = ..., exitOnRun: _Optional[int] = ..., exitOnPrepare: _Optional[int] = ..., exitOnRunProbability: _Optional[float] = ..., exitOnExportCache: _Optional[bool] = ..., deviceStatus: _Optional[int] = ..., deviceBusy: _Optional[bool] = ..., corruptExportedCache: _Optional[bool] = ...) -> None: ...

class FaultReply(_message.Message):
    __slots__ = ("returnCode", "faults")
    RETURNCODE_FIELD_NUMBER: _ClassVar[int]
    FAULTS_FIELD_NUMBER: _ClassVar[int]
    returnCode: int
    faults: FaultConfig
    def __init__(self, returnCode: _Optional[int] = ..., faults: _Optional[_Union[FaultConfig, _Mapping]] = ...) -> None: ...

class RunLatency(_message.Message):
    __slots__ = ("upperBoundsSeconds", "counts", "sumSeconds")
    UPPERBOUNDSSECONDS_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    SUMSECONDS_FIELD_NUMBER: _ClassVar[int]
    upperBoundsSeconds: _containers.RepeatedScalarFieldContainer[float]
    counts: _containers.RepeatedScalarFieldContainer[int]
    sumSeconds: float
    def __init__(self, upperBoundsSeconds: _Optional[_Iterable[float]] = ..., counts: _Optional[_Iterable[int]] = ..., sumSeconds: _Optional[float] = ...) -> None: ...

class RunQueue(_message.Message):
    __slots__ = ("cores", "coresInUse", "queued", "waited", "waitSeconds", "gaveUp")
    CORES_FIELD_NUMBER: _ClassVar[int]
    CORESINUSE_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    WAITED_FIELD_NUMBER: _ClassVar[int]
    WAITSECONDS_FIELD_NUMBER: _ClassVar[int]
    GAVEUP_FIELD_NUMBER: _ClassVar[int]
    cores: int
    coresInUse: int
    queued: int
    waited: int
    waitSeconds: float
    gaveUp: int
    def __init__(self, cores: _Optional[int] = ..., coresInUse: _Optional[int] = ..., queued: _Optional[int] = ..., waited: _Optional[int] = ..., waitSeconds: _Optional[float] = ..., gaveUp: _Optional[int] = ...) -> None: ...

class DriverStatus(_message.Message):
    __slots__ = ("returnCode", "kind", "name", "deviceName", "vendor", "pid", "uptimeSeconds", "inFlightRuns", "runsCompleted", "runsFailed", "runsAbandoned", "sessions", "faultInjectionEnabled", "faults", "details", "runLatency", "sharedMemoryBudgetBytes", "sessionMemoryBudgetBytes", "modelMemoryLimitBytes", "sharedMemoryUsedBytes", "runQueue", "uidMemoryBudgetBytes", "maxSessionsPerUid", "uids", "runsFailedByCode", "modelRuns")
    class DetailsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class RunsFailedByCodeEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    RETURNCODE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICENAME_FIELD_NUMBER: _ClassVar[int]
    VENDOR_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    UPTIMESECONDS_FIELD_NUMBER: _ClassVar[int]
    INFLIGHTRUNS_FIELD_NUMBER: _ClassVar[int]
    RUNSCOMPLETED_FIELD_NUMBER: _ClassVar[int]
    RUNSFAILED_FIELD_NUMBER: _ClassVar[int]
    RUNSABANDONED_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    FAULTINJECTIONENABLED_FIELD_NUMBER: _ClassVar[int]
    FAULTS_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    RUNLATENCY_FIELD_NUMBER: _ClassVar[int]
    SHAREDMEMORYBUDGETBYTES_FIELD_NUMBER: _ClassVar[int]
    SESSIONMEMORYBUDGETBYTES_FIELD_NUMBER: _ClassVar[int]
    MODELMEMORYLIMITBYTES_FIELD_NUMBER: _ClassVar[int]
    SHAREDMEMORYUSEDBYTES_FIELD_NUMBER: _ClassVar[int]
    RUNQUEUE_FIELD_NUMBER: _ClassVar[int]
    UIDMEMORYBUDGETBYTES_FIELD_NUMBER: _ClassVar[int]
    MAXSESSIONSPERUID_FIELD_NUMBER: _ClassVar[int]
    UIDS_FIELD_NUMBER: _ClassVar[int]
    RUNSFAILEDBYCODE_FIELD_NUMBER: _ClassVar[int]
    MODELRUNS_FIELD_NUMBER: _ClassVar[int]
    returnCode: int
    kind: str
    name: str
    deviceName: str
    vendor: str
    pid: int
    uptimeSeconds: float
    inFlightRuns: int
    runsCompleted: int
    runsFailed: int
    runsAbandoned: int
    sessions: _containers.RepeatedCompositeFieldContainer[SessionStatus]
    faultInjectionEnabled: bool
    faults: FaultConfig
    details: _containers.ScalarMap[str, str]
    runLatency: RunLatency
    sharedMemoryBudgetBytes: int
    sessionMemoryBudgetBytes: int
    modelMemoryLimitBytes: int
    sharedMemoryUsedBytes: int
    runQueue: RunQueue
    uidMemoryBudgetBytes: int
    maxSessionsPerUid: int
    uids: _containers.RepeatedCompositeFieldContainer[UidStatus]
    runsFailedByCode: _containers.ScalarMap[str, int]
    modelRuns: _containers.RepeatedCompositeFieldContainer[ModelRuns]
    def __init__(self, returnCode: _Optional[int] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., deviceName: _Optional[str] = ..., vendor: _Optional[str] = ..., pid: _Optional[int] = ..., uptimeSeconds: _Optional[float] = ..., inFlightRuns: _Optional[int] = ..., runsCompleted: _Optional[int] = ..., runsFailed: _Optional[int] = ..., runsAbandoned: _Optional[int] = ..., sessions: _Optional[_Iterable[_Union[SessionStatus, _Mapping]]] = ..., faultInjectionEnabled: _Optional[bool] = ..., faults: _Optional[_Union[FaultConfig, _Mapping]] = ..., details: _Optional[_Mapping[str, str]] = ..., runLatency: _Optional[_Union[RunLatency, _Mapping]] = ..., sharedMemoryBudgetBytes: _Optional[int] = ..., sessionMemoryBudgetBytes: _Optional[int] = ..., modelMemoryLimitBytes: _Optional[int] = ..., sharedMemoryUsedBytes: _Optional[int] = ..., runQueue: _Optional[_Union[RunQueue, _Mapping]] = ..., uidMemoryBudgetBytes: _Optional[int] = ..., maxSessionsPerUid: _Optional[int] = ..., uids: _Optional[_Iterable[_Union[UidStatus, _Mapping]]] = ..., runsFailedByCode: _Optional[_Mapping[str, int]] = ..., modelRuns: _Optional[_Iterable[_Union[ModelRuns, _Mapping]]] = ...) -> None: ...

class ModelRuns(_message.Message):
    __slots__ = ("model", "completed", "failed", "abandoned")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    ABANDONED_FIELD_NUMBER: _ClassVar[int]
    model: str
    completed: int
    failed: int
    abandoned: int
    def __init__(self, model: _Optional[str] = ..., completed: _Optional[int] = ..., failed: _Optional[int] = ..., abandoned: _Optional[int] = ...) -> None: ...
