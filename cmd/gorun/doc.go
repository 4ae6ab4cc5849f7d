// Command gorun launches a gorovod job: one process (rank) per slot of a
// host list, wired together through a rendezvous service, with their output
// streamed back and the whole job stopped the moment any rank fails.
//
// Usage:
//
//	gorun [flags] program [args...]
//	gorun -np 4 -H host1:2,host2:2 ./train --epochs 3
//	gorun -np 8 -hostfile hosts.txt --bind-addr 10.0.0.1 ./train
//
// Flags go before the program; everything from the program on is passed to
// it untouched (put -- before a program whose name starts with '-'). Bool
// flags take their value after '=' (--verbose=false).
//
// Job:
//
//	-np N                 ranks to start (default: all the slots of -H or -hostfile)
//	--start-timeout D     how long ranks wait for each other in hvd.Init (30s)
//	-x NAME, -x NAME=v    pass a variable to every rank (repeatable; NAME1,NAME2)
//	--ps N                a parameter-server job: -np workers, N servers and a
//	                      chief (rank 0, on the first host without a slot), each
//	                      rank with GOROVOD_PS_SERVERS=N; a failing worker is
//	                      logged and the job goes on
//	--evaluator           with --ps: the program once more, GOROVOD_ROLE=evaluator
//	--evaluator-timeout D how long it runs on after the chief ends (5m), then SIGTERM
//
// Hosts (without -H or -hostfile: the nodes and slots of the Slurm
// allocation gorun runs in, started through srun; else localhost with -np
// slots):
//
//	-H, --hosts LIST      host1:2,host2:2 (repeatable); this machine may appear once
//	                      (localhost, 127.0.0.1, ::1 and its name are one host)
//	-hostfile FILE        one "host slots=N" per line, '#' comments (1 MiB at most)
//	--bind-addr ADDR      this host's address that ranks reach the rendezvous on
//	                      (default: chosen by route lookup, see below)
//	--network-interface IF  interface for the rendezvous and the ranks' data plane
//	-p, --ssh-port N      ssh port of remote hosts
//	-i, --ssh-identity-file F  ssh private key
//	--launcher L          auto, local, ssh or srun (each rank a one-task step
//	                      of the allocation: no ssh between nodes needed)
//
// With remote hosts and neither --bind-addr nor --network-interface, gorun
// chooses the rendezvous address itself: the local address of this
// machine's route to each remote host (to the HostName that ssh -G gives
// it), listened on where all hosts agree, and on every interface, each
// host dialing its own route's address, where they differ; 127.0.0.1 when
// every host is this machine. Before any rank starts, each remote host
// opens a connection back to its address over the ssh session that checks
// it, and one that cannot fails the launch with
//
//	gorun: host host2 cannot connect back to gorun at 10.0.0.1:41234: REASON; give gorun --bind-addr with an address of this machine that host2 can reach, or --network-interface with the interface that leads to it
//
// (a remote host none of whose ranks joined within the start timeout is
// named above the failure that ended the job, "no rank on host host2
// registered within the start timeout (30s); if they cannot connect back
// to gorun at ADDR, give gorun --bind-addr ...", and that failure's exit
// status stands). A --bind-addr that is not this machine's, and a
// --network-interface that it lacks or that has no address, are refused
// naming the flag. Ranks bind their data plane to the address of their
// route to the rendezvous.
//
// Output:
//
//	--output-filename DIR  also write DIR/rank.RR/stdout and DIR/rank.RR/stderr
//	--verbose              log the placement and the commands (never the secret)
//	--metrics-dir DIR      write DIR/metrics.jsonl: the ranks' hvd.LogScalars
//	                       scalars, their runtime series, the job's events;
//	                       and DIR/summary.svg, their plots, at the end
//	--dashboard ADDR       serve the job's live dashboard and /metrics on ADDR
//	--dashboard-linger D   keep serving it D after the job ended
//
// gorun's own log shows warnings and errors; --verbose adds its info records
// (placement, commands, ranks stopping), --log-level debug its debug records
// too, and --log-level error hides its warnings.
//
// Tuning, passed to every rank: --fusion-threshold-mb (64), --cycle-time-ms
// (1), --cache-capacity (1024), --stall-check-time (60s),
// --stall-shutdown-time (0 = none of its own: --op-timeout ends a stall),
// --timeline-filename, --log-level (info), --op-timeout (10m; bounds every
// wait for another rank, a stalled tensor's included, 0 = none),
// --no-shared-memory (links between ranks on one host use shared memory
// unless given), --hierarchical-allreduce (auto; on
// runs all-reduce, all-gather and broadcast in two levels, inside each host
// and then one copy per host across the network, off keeps the flat ring),
// --autotune (rank 0 tries fusion thresholds, cycle times, the
// hierarchical switch and the response cache while the job trains and
// keeps the setting that all-reduces the most bytes per second; see
// collective/engine), --autotune-log FILE (every trial as CSV), --tls
// (the rendezvous and every TCP link between ranks inside TLS 1.3, keyed
// from the job secret; see README "Security") and --tcp-congestion NAME
// (the congestion control of TCP links between hosts; default: Reno;
// "host": each host's own).
// Durations take Go syntax (90s, 1m30s) or seconds.
//
// A tuning flag or --start-timeout that is not on the command line takes
// the value of its variable in gorun's environment, if set: the flag wins,
// then the environment, then the default, so
//
//	GOROVOD_LOG_LEVEL=debug gorun -np 2 ./train
//
// runs the ranks (and gorun) at debug level. The variables are
// GOROVOD_START_TIMEOUT, GOROVOD_FUSION_THRESHOLD (in bytes),
// GOROVOD_CYCLE_TIME, GOROVOD_CACHE_CAPACITY, GOROVOD_STALL_CHECK_TIME,
// GOROVOD_STALL_SHUTDOWN_TIME, GOROVOD_TIMELINE, GOROVOD_LOG_LEVEL,
// GOROVOD_OP_TIMEOUT, GOROVOD_NO_SHARED_MEMORY (1 = --no-shared-memory),
// GOROVOD_HIERARCHICAL_ALLREDUCE (auto, on or off), GOROVOD_AUTOTUNE (1 =
// --autotune), GOROVOD_AUTOTUNE_LOG, GOROVOD_TLS (1 = --tls),
// GOROVOD_PROCESS_SETS and GOROVOD_TCP_CONGESTION, in
// the syntax the ranks read (Go durations); a bad value is a command-line
// error naming the variable.
//
// Every line a rank prints appears as "[R]<stdout>: text" or
// "[R]<stderr>: text". When a rank fails, gorun stops the others (SIGTERM,
// then SIGKILL 3 s later) and prints one line such as
//
//	gorun: rank 2 on host2 exited with status 3; stopped the other 3 ranks
//
// A rank that stops answering (stopped or hung) makes the others fail
// after --op-timeout (or --stall-shutdown-time); gorun then names it,
// kills it with SIGKILL and exits 1:
//
//	gorun: rank 1 on host2 stopped answering (no answer within 2s, reported by rank 0); killed it
//
// SIGINT or SIGTERM stops every rank the same way; a second one kills gorun
// at once, and its local ranks with it.
//
// Exit status: 0 when every rank succeeded; the status of the first rank
// that failed (1 if it has none, e.g. killed by a signal); 2 for a mistake
// on the command line (flags, host list, hostfile, -np larger than the
// slots, a bad GOROVOD_ variable in gorun's environment, a --bind-addr or
// --network-interface that cannot be used, a host that cannot connect
// back); 130 when
// interrupted; 1 for anything else (a rank that could not start, an
// unreachable host).
package main
