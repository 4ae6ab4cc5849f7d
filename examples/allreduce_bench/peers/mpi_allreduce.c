/*
 * mpi_allreduce: the MPI side of allreduce_bench's comparison. It measures
 * MPI_Allreduce exactly as allreduce_bench measures gorovod, so that the
 * figures of the two can be set side by side:
 *
 *   - float32 elements, MPI_SUM, in place (MPI_IN_PLACE), bytes per rank;
 *   - per size: warm-up calls, then samples of k back-to-back calls after a
 *     barrier (the calls and k by size, the table of allreduce_bench's plan);
 *     rank 0 decides for every rank whether another call or sample follows,
 *     from the counts and the time budgets;
 *   - a sample's time is the slowest rank's; the result is the median;
 *   - a last all-reduce of rank+1 everywhere must give n(n+1)/2 in every
 *     element (exact in float32 for the n here).
 *
 * Rank 0 prints one line per size, then "# done":
 *   RESULT,label,n,bytes,samples,k,median_s,min_s,mean_s,algbw_GBps,busbw_GBps,ok|FAIL
 *
 * Build: mpicc.openmpi -O2 -o mpi_allreduce_ompi mpi_allreduce.c (or mpicc.mpich)
 * Run:   mpirun -np 4 ./mpi_allreduce_ompi -l ompi-shm -s 4096,1048576
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* plan gives the warm-up calls, the most samples and the calls per sample
 * for a size: allreduce_bench's table. */
static int max_iters; /* -i: the most samples at every size (0: the table's) */

static void plan(long bytes, int *warm, int *iters, int *k) {
	if (bytes <= 16L << 10) {
		*warm = 200, *iters = 200, *k = 20;
	} else if (bytes <= 256L << 10) {
		*warm = 50, *iters = 100, *k = 5;
	} else if (bytes <= 4L << 20) {
		*warm = 10, *iters = 50, *k = 1;
	} else if (bytes <= 32L << 20) {
		*warm = 3, *iters = 20, *k = 1;
	} else if (bytes <= 128L << 20) {
		*warm = 2, *iters = 10, *k = 1;
	} else {
		*warm = 1, *iters = 5, *k = 1;
	}
	if (max_iters > 0)
		*iters = max_iters;
}

static void fill(float *buf, long count, float v) {
	for (long i = 0; i < count; i++)
		buf[i] = v;
}

/* proceed broadcasts rank 0's decision to go on. */
static int proceed(int rank, int more) {
	int flag = rank == 0 ? more : 0;
	MPI_Bcast(&flag, 1, MPI_INT, 0, MPI_COMM_WORLD);
	return flag;
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void measure(int rank, int n, long bytes, const char *label, double budget, double warm_budget) {
	long count = bytes / 4;
	float *buf = malloc((size_t)(count > 0 ? count : 1) * sizeof(float));
	int warm, iters, k;
	plan(bytes, &warm, &iters, &k);
	double *samples = malloc((size_t)iters * sizeof(double));
	if (buf == NULL || samples == NULL) {
		fprintf(stderr, "mpi_allreduce: out of memory for %ld bytes\n", bytes);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	double start = MPI_Wtime();
	for (int w = 0; proceed(rank, w < warm && (w < 1 || MPI_Wtime() - start < warm_budget)); w++) {
		if (w % 10 == 0)
			fill(buf, count, (float)(rank + 1)); /* in-place sums grow n-fold a call */
		MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	}
	int m = 0;
	start = MPI_Wtime();
	while (proceed(rank, m < iters && (m < 3 || MPI_Wtime() - start < budget))) {
		fill(buf, count, (float)(rank + 1));
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int i = 0; i < k; i++)
			MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		samples[m++] = (MPI_Wtime() - t0) / k;
	}
	/* Per sample, the slowest rank counts. */
	MPI_Allreduce(MPI_IN_PLACE, samples, m, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	fill(buf, count, (float)(rank + 1));
	MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	long wrong = 0;
	float want = (float)n * (float)(n + 1) / 2;
	for (long i = 0; i < count; i++)
		wrong += buf[i] != want;
	MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) {
		qsort(samples, (size_t)m, sizeof(double), cmp);
		double med = m % 2 ? samples[m / 2] : (samples[m / 2 - 1] + samples[m / 2]) / 2, sum = 0;
		for (int i = 0; i < m; i++)
			sum += samples[i];
		double algbw = (double)bytes / med / 1e9;
		printf("RESULT,%s,%d,%ld,%d,%d,%.9f,%.9f,%.9f,%.4f,%.4f,%s\n", label, n, bytes, m, k, med, samples[0],
		       sum / m, algbw, algbw * 2 * (n - 1) / n, wrong ? "FAIL" : "ok");
		fflush(stdout);
	}
	free(samples);
	free(buf);
}

int main(int argc, char **argv) {
	const char *label = "mpi", *sizes = "4096,65536,1048576,16777216";
	double budget = 1.5, warm_budget = 0.5;
	MPI_Init(&argc, &argv);
	int rank, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-l"))
			label = argv[i + 1];
		else if (!strcmp(argv[i], "-s"))
			sizes = argv[i + 1];
		else if (!strcmp(argv[i], "-b"))
			budget = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "-w"))
			warm_budget = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "-i"))
			max_iters = atoi(argv[i + 1]);
		else {
			if (rank == 0)
				fprintf(stderr, "usage: mpi_allreduce [-l label] [-s bytes,...] [-b budget_s] [-w warm_budget_s] [-i max_samples]\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	char *list = strdup(sizes);
	for (char *tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ","))
		measure(rank, n, atol(tok), label, budget, warm_budget);
	free(list);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("# done\n");
	MPI_Finalize();
	return 0;
}
