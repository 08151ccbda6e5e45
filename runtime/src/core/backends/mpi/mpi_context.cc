#include "core/backends/mpi/mpi_context.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/reduce.h"

namespace hvdtune::internal {
namespace {

void Check(int code, const char* call) {
  if (code != MPI_SUCCESS) throw ConfigError(MpiError(call, code).message());
}

int OpIndex(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin:
      return 1;
    case ReduceOp::kMax:
      return 2;
    case ReduceOp::kProduct:
      return 3;
    default:
      return 0;
  }
}

// MPI user functions carry no context pointer: one instantiation per
// (dtype, op) pair. MPI computes inout = in (op) inout.
template <DataType D, ReduceOp O>
void HalfReduceFn(void* in, void* inout, int* len, MPI_Datatype*) {
  ReduceInto(inout, in, *len, D, O);
}

template <DataType D>
void CreateOps(MPI_Op (&ops)[4]) {
  MPI_Op_create(&HalfReduceFn<D, ReduceOp::kSum>, 1, &ops[0]);
  MPI_Op_create(&HalfReduceFn<D, ReduceOp::kMin>, 1, &ops[1]);
  MPI_Op_create(&HalfReduceFn<D, ReduceOp::kMax>, 1, &ops[2]);
  MPI_Op_create(&HalfReduceFn<D, ReduceOp::kProduct>, 1, &ops[3]);
}

}  // namespace

Status MpiError(const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return Status::Internal(std::string(call) + " failed: " +
                          std::string(text, static_cast<std::size_t>(len)));
}

MpiContext MpiContext::Create(const std::vector<int>& world_ranks) {
  MpiContext ctx;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) {
    throw ConfigError("MPI was already finalized in this process");
  }
  int provided = 0;
  if (!initialized) {
    PrepareMpiInit();
    Check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided),
          "MPI_Init_thread");
    ctx.initialized_mpi = true;
    // MPI may be finalized once only, so it stays up for the process's
    // lifetime and later Runtimes reuse it.
    std::atexit([] {
      int fin = 0;
      MPI_Finalized(&fin);
      if (!fin) MPI_Finalize();
    });
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    throw ConfigError(
        "MPI provides thread level " + std::to_string(provided) +
        "; hvdtune needs MPI_THREAD_SERIALIZED or higher (initialise MPI with "
        "MPI_Init_thread(MPI_THREAD_MULTIPLE) or let hvdtune do it)");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm parent = MPI_COMM_WORLD;
  MPI_Comm subset = MPI_COMM_NULL;
  if (!world_ranks.empty()) {
    // A process set: collective over its ranks only, so the other ranks of
    // the job need not take part.
    MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    const int incl =
        MPI_Group_incl(world_group, static_cast<int>(world_ranks.size()),
                       world_ranks.data(), &group);
    const int created =
        incl == MPI_SUCCESS
            ? MPI_Comm_create_group(MPI_COMM_WORLD, group, 0, &subset)
            : incl;
    if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    Check(created, "MPI_Comm_create_group");
    if (subset == MPI_COMM_NULL) {
      throw ConfigError("this rank is not one of the ranks the runtime spans");
    }
    parent = subset;
  }
  Check(MPI_Comm_dup(parent, &ctx.control), "MPI_Comm_dup");
  Check(MPI_Comm_dup(parent, &ctx.data), "MPI_Comm_dup");
  if (subset != MPI_COMM_NULL) MPI_Comm_free(&subset);
  MPI_Comm_set_errhandler(ctx.control, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(ctx.data, MPI_ERRORS_RETURN);
  MPI_Comm_rank(ctx.data, &ctx.rank);
  MPI_Comm_size(ctx.data, &ctx.size);
  return ctx;
}

void MpiContext::SplitNodes(int ranks_per_node) {
  MpiContext& ctx = *this;
  if (ranks_per_node > 0) {
    Check(MPI_Comm_split(ctx.data, ctx.rank / ranks_per_node, ctx.rank,
                         &ctx.local),
          "MPI_Comm_split");
  } else {
    Check(MPI_Comm_split_type(ctx.data, MPI_COMM_TYPE_SHARED, ctx.rank,
                              MPI_INFO_NULL, &ctx.local),
          "MPI_Comm_split_type");
  }
  MPI_Comm_rank(ctx.local, &ctx.local_rank);
  MPI_Comm_size(ctx.local, &ctx.local_size);
  Check(MPI_Comm_split(ctx.data, ctx.local_rank, ctx.rank, &ctx.cross),
        "MPI_Comm_split");
  MPI_Comm_rank(ctx.cross, &ctx.cross_rank);
  MPI_Comm_size(ctx.cross, &ctx.cross_size);
  MPI_Comm_set_errhandler(ctx.local, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(ctx.cross, MPI_ERRORS_RETURN);
}

int RanksOnThisMachine(MPI_Comm comm) {
  std::string id;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::getline(boot, id);
  if (id.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    id = host;
  }
  const std::vector<std::uint8_t> mine(id.begin(), id.end());
  const auto all = AllgatherBytes(comm, mine);
  return static_cast<int>(std::count(all.begin(), all.end(), mine));
}

std::vector<std::vector<std::uint8_t>> AllgatherBytes(
    MPI_Comm comm, const std::vector<std::uint8_t>& mine) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  const int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(size));
  Check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm),
        "MPI_Allgather");
  std::vector<int> displs(lens.size());
  int total = 0;
  for (std::size_t r = 0; r < lens.size(); ++r) {
    displs[r] = total;
    total += lens[r];
  }
  std::vector<std::uint8_t> all(static_cast<std::size_t>(total));
  Check(MPI_Allgatherv(mine.data(), len, MPI_BYTE, all.data(), lens.data(),
                       displs.data(), MPI_BYTE, comm),
        "MPI_Allgatherv");
  std::vector<std::vector<std::uint8_t>> out(lens.size());
  for (std::size_t r = 0; r < lens.size(); ++r) {
    out[r].assign(all.begin() + displs[r], all.begin() + displs[r] + lens[r]);
  }
  return out;
}

void MpiContext::Free() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Comm* c : {&cross, &local, &data, &control}) {
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }
}

MpiTypes::MpiTypes() {
  MPI_Type_contiguous(2, MPI_BYTE, &half_);
  MPI_Type_commit(&half_);
  MPI_Type_contiguous(2, MPI_BYTE, &bfloat16_);
  MPI_Type_commit(&bfloat16_);
  CreateOps<DataType::kFloat16>(half_ops_);
  CreateOps<DataType::kBFloat16>(bfloat16_ops_);
}

MpiTypes::~MpiTypes() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (int i = 0; i < 4; ++i) {
    if (half_ops_[i] != MPI_OP_NULL) MPI_Op_free(&half_ops_[i]);
    if (bfloat16_ops_[i] != MPI_OP_NULL) MPI_Op_free(&bfloat16_ops_[i]);
  }
  MPI_Type_free(&half_);
  MPI_Type_free(&bfloat16_);
}

MPI_Datatype MpiTypes::Type(DataType dtype) const {
  if (dtype == DataType::kFloat16) return half_;
  if (dtype == DataType::kBFloat16) return bfloat16_;
  const MPI_Datatype t = NativeMpiType(dtype);
  return t != MPI_DATATYPE_NULL ? t : MPI_BYTE;
}

MPI_Op MpiTypes::Op(DataType dtype, ReduceOp op) const {
  if (dtype == DataType::kFloat16) return half_ops_[OpIndex(op)];
  if (dtype == DataType::kBFloat16) return bfloat16_ops_[OpIndex(op)];
  switch (op) {
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kProduct:
      return MPI_PROD;
    default:
      return MPI_SUM;
  }
}

}  // namespace hvdtune::internal

namespace hvdtune {

void PrepareMpiInit() {
  // The cycle thread waits inside MPI while the application computes on
  // the same cores. Open MPI busy-polls while waiting unless it believes
  // the node is oversubscribed, so with one rank per core (2 ranks on
  // this 2-core machine) the waiting cycle thread took the core from the
  // training thread: mobilenet_v2 trained at 282 img/s instead of 420.
  // Yielding in the idle loop costs a sched_yield when nothing else is
  // runnable. Set before MPI_Init reads its parameters; a value the user
  // set (0 restores busy polling) is kept. Other MPIs ignore it.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
}

MPI_Datatype NativeMpiType(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8:
      return MPI_UINT8_T;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kFloat32:
      return MPI_FLOAT;
    case DataType::kFloat64:
      return MPI_DOUBLE;
    case DataType::kInt8:
      return MPI_INT8_T;
    case DataType::kInt16:
      return MPI_INT16_T;
    case DataType::kBool:
      return MPI_C_BOOL;
    default:
      return MPI_DATATYPE_NULL;
  }
}

std::string MpiLibraryVersion() {
  // MPI_Get_library_version may be called before MPI_Init.
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return {};
  std::string s(text, static_cast<std::size_t>(std::max(length, 0)));
  // "Open MPI v4.1.4, package: ..., ident: ..." -> "Open MPI v4.1.4"
  s.resize(std::min(s.size(), s.find_first_of(",\n")));
  return s;
}

}  // namespace hvdtune
