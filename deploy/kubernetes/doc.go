// Package kubernetes holds no code: it is the home of gorovod's Kubernetes
// manifests (indexed-job.yaml, an Indexed Job whose pods join as torchrun
// style ranks, and mpijob.yaml, a Kubeflow MPIJob whose ranks mpirun
// starts) and of the tests that check them without a cluster.
//
// The tests parse every document of both manifests and check what a job
// depends on: the kinds and API versions, that the number of ranks agrees
// everywhere, that the rendezvous address names the pod that runs rank 0,
// and how the job secret reaches GOROVOD_SECRET_FILE. Then they build the
// environment that each pod (or each rank mpirun starts) would get, feed it
// to jobenv.Detect, and, for the Indexed Job, start every rank in process
// and all-reduce across them. See README.md for how to build the image and
// run the jobs.
package kubernetes
