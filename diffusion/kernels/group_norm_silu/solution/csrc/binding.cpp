// Host path of group_norm_silu's CUDA kernels (resident, held): checks, one workspace allocation, the launches, in
// C++ (a Triton launch through Python costs ~14 us per call on an H200 host, a pybind11 call ~5 us).
#include <torch/extension.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <tuple>

#include "gn_resident.h"

namespace {

bool aligned16(const at::Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0; }

bool dtype_of(at::ScalarType t, kda_gn::DType* out) {
  switch (t) {
    case at::kHalf: *out = kda_gn::DType::kFP16; return true;
    case at::kBFloat16: *out = kda_gn::DType::kBF16; return true;
    case at::kFloat: *out = kda_gn::DType::kFP32; return true;
    default: return false;
  }
}

// (multiprocessors, shared memory a block may opt into) of a device: what the plan is sized by.
std::tuple<int64_t, int64_t> device_limits(int64_t device) {
  int sms = 0, smem = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, static_cast<int>(device)));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, static_cast<int>(device)));
  return {sms, smem};
}

// The tensors of one call as the CUDA kernels read them: false when they are not (not contiguous, not 16-byte
// aligned, a dtype the kernels lack, w and b of different dtypes); the caller then takes the Triton path.
struct Call {
  kda_gn::DType xt = kda_gn::DType::kFP32, wt = kda_gn::DType::kFP32;
  const void* w = nullptr;
  const void* b = nullptr;
};

bool accept(const at::Tensor& x, const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& bias,
            const at::Tensor& out, Call* call) {
  if (!x.is_cuda() || !dtype_of(x.scalar_type(), &call->xt) || !x.is_contiguous() || !out.is_contiguous() ||
      out.scalar_type() != x.scalar_type() || out.sizes() != x.sizes() || out.device() != x.device() ||
      !aligned16(x) || !aligned16(out) || x.dim() < 2)
    return false;
  const at::Tensor* wb[2] = {weight.has_value() ? &*weight : nullptr, bias.has_value() ? &*bias : nullptr};
  bool first = true;
  for (const at::Tensor* t : wb) {
    if (t == nullptr) continue;
    kda_gn::DType d;
    if (!dtype_of(t->scalar_type(), &d) || t->device() != x.device() || t->dim() != 1 || t->size(0) != x.size(1) ||
        t->stride(0) != 1 || (!first && d != call->wt))
      return false;
    call->wt = d;
    first = false;
  }
  call->w = wb[0] ? wb[0]->data_ptr() : nullptr;
  call->b = wb[1] ? wb[1]->data_ptr() : nullptr;
  return true;
}

// A salt for the next call's tags (HeldParams, Params): a counter shared by every kernel's calls, started from a
// clock so that another process's leftovers in the same memory carry other tags.
unsigned next_salt() {
  static std::atomic<unsigned> salt{static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count())};
  return salt.fetch_add(1);
}

// The checks every run starts with: false when `accept` refuses the tensors or a channel is not whole 16-byte
// vectors (the caller then takes the Triton path); a group count that does not divide C is the caller's error.
bool take(const at::Tensor& x, const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& bias,
          const at::Tensor& out, int64_t groups, Call* call) {
  if (!accept(x, weight, bias, out, call)) return false;
  const int64_t C = x.size(1), S = x.numel() / (x.size(0) * C);
  TORCH_CHECK_VALUE(groups > 0 && C % groups == 0, "num_groups ", groups, " must divide the ", C, " channels");
  return (S * x.element_size()) % 16 == 0;
}

// The tensors and unit geometry every kernel's parameters start with (kda_gn::GroupCall), for a call `accept` took.
void set_call(kda_gn::GroupCall& p, const at::Tensor& x, const at::Tensor& out, const Call& call, int64_t groups,
              double eps) {
  const int64_t B = x.size(0), C = x.size(1), S = x.numel() / (B * C), elem = x.element_size();
  p.x = x.data_ptr();
  p.y = out.data_ptr();
  p.w = call.w;
  p.b = call.b;
  p.group_vecs = static_cast<int>((C / groups) * S * elem / 16);
  p.channel_vecs = static_cast<int>(S * elem / 16);
  p.units = static_cast<int>(B * groups);
  p.groups = static_cast<int>(groups);
  p.cpg = static_cast<int>(C / groups);
  p.eps = static_cast<float>(eps);
}

// Runs y = silu(GroupNorm(x)) into `out` with a plan from the Python side (team_size, teams, chunk_vecs,
// ring_vecs). `counters`: the device's generations (int32, at least one per unit; Params), or none for arrival
// counters in this call's workspace, zeroed by a kernel of their own; `early_wb`: Params. Returns false, having
// launched nothing, when `accept` refuses this call's tensors.
bool run(const at::Tensor& x, const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& bias,
         const at::Tensor& out, int64_t groups, double eps, int64_t team_size, int64_t teams, int64_t chunk_vecs,
         int64_t ring_vecs, const c10::optional<at::Tensor>& counters, bool early_wb) {
  Call call;
  if (!take(x, weight, bias, out, groups, &call)) return false;
  const int64_t B = x.size(0), C = x.size(1), S = x.numel() / (B * C), elem = x.element_size();
  TORCH_CHECK_VALUE(team_size >= 1 && team_size <= kda_gn::kMaxTeam && teams >= 1 && chunk_vecs >= 1 &&
                        ring_vecs >= chunk_vecs && team_size * chunk_vecs >= (C / groups) * S * elem / 16 &&
                        (C / groups) * S * elem / 16 < (int64_t{1} << 31) && C / groups <= kda_gn::kMaxCpg,
                    "group_norm_silu: inconsistent resident plan (team_size ", team_size, ", teams ", teams,
                    ", chunk_vecs ", chunk_vecs, ", ring_vecs ", ring_vecs, ")");

  const int64_t units = B * groups;
  const bool generations = counters.has_value();
  TORCH_CHECK_VALUE(!generations || (counters->is_cuda() && counters->device() == x.device() &&
                                     counters->scalar_type() == at::kInt && counters->is_contiguous() &&
                                     counters->numel() >= units),
                    "group_norm_silu: the resident kernel's counters must be a contiguous int32 tensor of at least ",
                    units, " elements on ", x.device());
  c10::cuda::CUDAGuard guard(x.device());
  // One allocation: the members' (mean, M2), tagged with the generation where the counters are the device's
  // generations, else followed by the units' arrival counters (zeroed by kda_gn::launch).
  const int64_t part_floats = team_size > 1 ? (generations ? 4 : 2) * units * team_size : 0;
  at::Tensor ws =
      at::empty({part_floats + (team_size > 1 && !generations ? units : 0) + 1}, x.options().dtype(at::kFloat));
  auto stream = c10::cuda::getCurrentCUDAStream();

  kda_gn::Params p;
  set_call(p, x, out, call, groups, eps);
  p.partials = reinterpret_cast<float2*>(ws.data_ptr<float>());
  p.counters = generations ? reinterpret_cast<unsigned*>(counters->data_ptr<int>())
                           : reinterpret_cast<unsigned*>(ws.data_ptr<float>() + part_floats);
  p.generations = generations;
  p.salt = next_salt();
  p.early_wb = early_wb;
  p.team_size = static_cast<int>(team_size);
  p.teams = static_cast<int>(teams);
  p.chunk_vecs = static_cast<int>(chunk_vecs);
  p.ring_vecs = static_cast<int>(ring_vecs);
  const cudaError_t err = kda_gn::launch(p, call.xt, call.wt, stream.stream());
  TORCH_CHECK(err == cudaSuccess, "group_norm_silu resident kernel launch failed: ", cudaGetErrorString(err));
  return true;
}

// v17: the held kernel with a plan from the Python side (ctas, slice_vecs, chunks, chunk_vecs, ring_slots, lag, warps,
// tma_store, reg_chunks, prefetch) and the device's epoch (an int32, HeldParams).
// Returns false, having computed nothing, when `accept` refuses this call's tensors or the driver refuses the grid.
bool run_held(const at::Tensor& x, const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& bias,
              const at::Tensor& out, int64_t groups, double eps, int64_t ctas, int64_t slice_vecs, int64_t chunks,
              int64_t chunk_vecs, int64_t ring_slots, int64_t lag, int64_t warps, int64_t tma_store,
              int64_t reg_chunks, int64_t prefetch, const at::Tensor& epoch) {
  Call call;
  if (!take(x, weight, bias, out, groups, &call)) return false;
  const int64_t B = x.size(0), C = x.size(1), S = x.numel() / (B * C), elem = x.element_size();
  const int64_t group_vecs = (C / groups) * S * elem / 16, channel_vecs = S * elem / 16;
  // 16-bit x; every CTA owns a non-empty slice of at most two channels that fits its chunks, and lag + 1 slices fit
  // the ring (the kernel relies on all of it: a ring too small for them never frees the slot the next copy waits for).
  TORCH_CHECK_VALUE(ctas >= 1 && ctas <= kda_gn::kHeldMaxCtas && slice_vecs >= 1 && slice_vecs <= channel_vecs &&
                        (ctas - 1) * slice_vecs < group_vecs && ctas * slice_vecs >= group_vecs && chunks >= 1 &&
                        chunk_vecs >= 1 && (chunks - 1) * chunk_vecs < slice_vecs &&
                        chunks * chunk_vecs >= slice_vecs && lag >= 0 && lag <= kda_gn::kHeldMaxLag &&
                        ring_slots >= (lag + 1) * chunks && ring_slots <= kda_gn::kHeldMaxSlots &&
                        B * groups * group_vecs < (int64_t{1} << 40) && group_vecs < (int64_t{1} << 31) &&
                        elem == 2 && (warps == 8 || warps == 12 || warps == 16) && prefetch >= 0 &&
                        prefetch <= (1 << 20) &&
                        reg_chunks >= 0 && reg_chunks <= kda_gn::kHeldRegChunks &&
                        (reg_chunks == 0 ||
                         (warps == kda_gn::kHeldRegWarps && tma_store == 0 &&
                          chunk_vecs * kda_gn::kHeldRegChunks <= kda_gn::kHeldRegVecs * kda_gn::kHeldRegWarps * 32)),
                    "group_norm_silu: inconsistent held plan (x of ", elem, "-byte elements, ctas ", ctas,
                    ", slice_vecs ", slice_vecs, ", chunks ", chunks, ", chunk_vecs ", chunk_vecs, ", ring_slots ",
                    ring_slots, ", lag ", lag, ", warps ", warps, ", tma_store ", tma_store, ", reg_chunks ", reg_chunks,
                    ", prefetch ", prefetch, ")");

  c10::cuda::CUDAGuard guard(x.device());
  const int64_t units = B * groups;
  // The partials, [units][ctas] of 16 bytes, need no zeroing: each call's are told apart by its tag (HeldParams).
  at::Tensor ws = at::empty({4 * units * ctas}, x.options().dtype(at::kFloat));
  kda_gn::HeldParams p;
  set_call(p, x, out, call, groups, eps);
  p.partials = reinterpret_cast<uint4*>(ws.data_ptr<float>());
  p.salt = next_salt();
  p.epoch = reinterpret_cast<unsigned*>(epoch.data_ptr<int>());
  p.ctas = static_cast<int>(ctas);
  p.slice_vecs = static_cast<int>(slice_vecs);
  p.chunks = static_cast<int>(chunks);
  p.chunk_vecs = static_cast<int>(chunk_vecs);
  p.ring_slots = static_cast<int>(ring_slots);
  p.lag = static_cast<int>(lag);
  p.warps = static_cast<int>(warps);
  p.tma_store = tma_store != 0;
  p.reg_chunks = static_cast<int>(reg_chunks);
  p.prefetch = static_cast<int>(prefetch);
  const cudaError_t err = kda_gn::launch_held(p, call.xt, call.wt, c10::cuda::getCurrentCUDAStream().stream());
  if (err == cudaErrorCooperativeLaunchTooLarge) {  // a GPU (share) smaller than at plan time: the caller falls back
    (void)cudaGetLastError();
    return false;
  }
  TORCH_CHECK(err == cudaSuccess, "group_norm_silu held kernel launch failed: ", cudaGetErrorString(err));
  return true;
}

#ifdef KDA_GN_TRACE
// The last held call's global-timer stamps, [kHeldMaxCtas][kHeldTraceEvents] nanoseconds (a KDA_GN_TRACE build).
at::Tensor held_trace() {
  at::Tensor out = at::empty({kda_gn::kHeldMaxCtas, kda_gn::kHeldTraceEvents}, at::dtype(at::kLong));
  C10_CUDA_CHECK(kda_gn::held_trace_copy(reinterpret_cast<unsigned long long*>(out.data_ptr<int64_t>())));
  return out;
}
#endif

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
#ifdef KDA_GN_TRACE
  m.def("held_trace", &held_trace, "the last held call's global-timer stamps per CTA and event (nanoseconds)");
#endif
  m.def("device_limits", &device_limits, "(multiprocessors, opt-in shared memory per block) of a CUDA device");
  m.def("run", &run, "silu(GroupNorm(x)) into out through the resident kernel; False: this call is not handled");
  m.def("run_held", &run_held,
        "silu(GroupNorm(x)) into out through the held kernel; False: this call is not handled");
}
