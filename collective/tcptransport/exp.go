package tcptransport

import "os"

var expShared = os.Getenv("GOROVOD_TCP_SHARED") == "1" // EXPERIMENT
