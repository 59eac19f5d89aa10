/* The bus bandwidth of MPI_Allreduce (float sums) on this machine, as
 * nccl-tests defines it: 2 (n - 1) / n * bytes / seconds, with n ranks, for
 * messages of 1 MiB to 256 MiB; the median of 9 calls after 2 untimed
 * ones. The cpu device model's link figures (targets/cpu/Devices.cpp) come
 * from it.
 *
 *   mpicc -O2 bench/collectives/mpi_allreduce.c -o /tmp/mpi_allreduce
 *   mpirun --oversubscribe -np 2 /tmp/mpi_allreduce
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (rank == 0)
    printf("%d ranks\n%12s %12s %12s\n", n, "bytes", "ms", "busbw GB/s");
  for (size_t bytes = 1 << 20; bytes <= (size_t)256 << 20; bytes *= 4) {
    size_t count = bytes / sizeof(float);
    float *x = malloc(bytes);
    for (size_t i = 0; i < count; ++i)
      x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
    double t[9];
    for (int k = -2; k < 9; ++k) {
      MPI_Barrier(MPI_COMM_WORLD);
      double s = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, x, (int)count, MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      double e = MPI_Wtime() - s;
      if (k >= 0)
        t[k] = e;
    }
    qsort(t, 9, sizeof(double), cmp);
    if (rank == 0)
      printf("%12zu %12.3f %12.2f\n", bytes, t[4] * 1e3,
             2.0 * (n - 1) / n * (double)bytes / t[4] / 1e9);
    free(x);
  }
  MPI_Finalize();
  return 0;
}
