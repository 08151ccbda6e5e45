/* What an MPI job sees of the emulated cluster (tools/cluster.sh), for
 * tools/tests/cluster_test.sh:
 *
 *   cluster_probe layout
 *       rank 0 prints "nodes N ranks_per_node R" as MPI_Comm_split_type
 *       (MPI_COMM_TYPE_SHARED) splits the job, and "hosts H": how many
 *       distinct processor names the ranks report;
 *   cluster_probe local MIB | cross MIB
 *       every rank exchanges MIB MiB with a partner on its own node (local:
 *       the next local rank) or on the next node (cross: the same local rank
 *       there), then rank 0 prints "exchanged BYTES" (bytes sent per rank).
 *       The test reads the links' byte counters around it.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int Fail(const char* what) {
  fprintf(stderr, "cluster_probe: %s\n", what);
  MPI_Abort(MPI_COMM_WORLD, 2);
  return 2;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                      &local);
  int local_rank, local_size;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  MPI_Comm cross; /* the ranks with this local rank, one per node */
  MPI_Comm_split(MPI_COMM_WORLD, local_rank, rank, &cross);
  int node, nodes;
  MPI_Comm_rank(cross, &node);
  MPI_Comm_size(cross, &nodes);

  if (argc == 2 && strcmp(argv[1], "layout") == 0) {
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    char* all = rank == 0 ? calloc((size_t)size, MPI_MAX_PROCESSOR_NAME) : NULL;
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all,
               MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    int leaders = local_rank == 0, nodes_seen = 0;
    MPI_Reduce(&leaders, &nodes_seen, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      int hosts = 0;
      for (int i = 0; i < size; ++i) {
        int seen = 0;
        for (int j = 0; j < i && !seen; ++j) {
          seen = strcmp(all + (size_t)i * MPI_MAX_PROCESSOR_NAME,
                        all + (size_t)j * MPI_MAX_PROCESSOR_NAME) == 0;
        }
        hosts += !seen;
      }
      printf("nodes %d ranks_per_node %d\nhosts %d\n", nodes_seen, local_size,
             hosts);
      free(all);
    }
  } else if (argc == 3 &&
             (strcmp(argv[1], "local") == 0 || strcmp(argv[1], "cross") == 0)) {
    const long mib = strtol(argv[2], NULL, 10);
    if (mib <= 0 || mib > 4096) return Fail("MIB must be 1..4096");
    const int is_local = argv[1][0] == 'l';
    MPI_Comm comm = is_local ? local : cross;
    const int me = is_local ? local_rank : node;
    const int n = is_local ? local_size : nodes;
    if (n < 2) return Fail("needs 2 ranks per node (local) or 2 nodes (cross)");
    const int chunk = 1 << 20;
    char* send = malloc((size_t)chunk);
    char* recv = malloc((size_t)chunk);
    if (send == NULL || recv == NULL) return Fail("out of memory");
    memset(send, rank & 0xff, (size_t)chunk);
    for (long i = 0; i < mib; ++i) {
      MPI_Sendrecv(send, chunk, MPI_CHAR, (me + 1) % n, 0, recv, chunk,
                   MPI_CHAR, (me + n - 1) % n, 0, comm, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("exchanged %ld\n", mib * (long)chunk);
    free(send);
    free(recv);
  } else {
    if (rank == 0) {
      fprintf(stderr, "usage: cluster_probe layout | local MIB | cross MIB\n");
    }
    MPI_Finalize();
    return 2;
  }
  MPI_Comm_free(&cross);
  MPI_Comm_free(&local);
  MPI_Finalize();
  return 0;
}
