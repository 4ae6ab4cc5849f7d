/*
 * mpi_hello: MPI's counterpart of examples/hello, for start-to-exit
 * comparisons of launchers (gorun against mpirun, mpiexec or srun). It
 * joins the MPI job, sums rank+1 over every rank with one MPI_Allreduce,
 * and leaves; rank 0 prints "size=N sum=S", as hello does. It exits 1 when
 * the sum is wrong.
 *
 * Build: mpicc.mpich -O2 -o mpi_hello mpi_hello.c (or mpicc.openmpi)
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
	int rank, size, mine, sum = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	mine = rank + 1;
	MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("size=%d sum=%d\n", size, sum);
	MPI_Finalize();
	return sum == size * (size + 1) / 2 ? 0 : 1;
}
