#include "runtime/shm.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace parity::runtime {
namespace {
namespace fs = std::filesystem;

TEST(Shm, TensorsRoundTripThroughAnotherMapping) {
  std::vector<at::Tensor> ts = {at::randn({16, 64}), at::arange(7, at::kLong), at::empty({0, 3}),
                                at::randn({5}).to(at::kBFloat16), at::ones({2, 2}, at::kBool)};
  const ShmLayout layout = LayOut(ts);
  for (size_t off : layout.offsets) EXPECT_EQ(off % 64, 0u);
  auto own = ShmSegment::Create(layout.bytes);
  ASSERT_TRUE(own.ok()) << own.error().message;
  EXPECT_GE(own->size(), layout.bytes);
  const nlohmann::json described = WriteTensors(*own, layout, ts);
  auto other = ShmSegment::Open(own->path(), own->size());  // as the other process maps it
  ASSERT_TRUE(other.ok()) << other.error().message;
  auto back = ReadTensors(*other, described, "test");
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->size(), ts.size());
  for (size_t k = 0; k < ts.size(); ++k) {
    EXPECT_EQ((*back)[k].scalar_type(), ts[k].scalar_type());
    EXPECT_EQ((*back)[k].sizes(), ts[k].sizes());
    EXPECT_TRUE(at::equal((*back)[k], ts[k])) << k;
  }
  const std::string path = own->path();
  *own = ShmSegment();  // the owner's segment file goes with it
  EXPECT_FALSE(fs::exists(path));
}

TEST(Shm, AnswersOutsideTheSegmentOrOfUnknownDtypeAreBadInput) {
  auto seg = ShmSegment::Create(1024);
  ASSERT_TRUE(seg.ok());
  const size_t size = seg->size();
  auto outside = ReadTensors(*seg, nlohmann::json::parse(R"([{"dtype": "float32", "shape": [64], "offset": )" +
                                                         std::to_string(size - 64) + "}]"),
                             "host op ns::op");
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(outside.error().message.find("host op ns::op: outputs[0]"), std::string::npos) << outside.error().message;
  auto dtype = ReadTensors(*seg, nlohmann::json::parse(R"([{"dtype": "float99", "shape": [1], "offset": 0}])"), "w");
  EXPECT_FALSE(dtype.ok());
  auto shape = ReadTensors(*seg, nlohmann::json::parse(R"([{"dtype": "float32", "offset": 0}])"), "w");
  EXPECT_FALSE(shape.ok());
  // A negative size, or sizes whose product overflows, are refused before anything is allocated.
  for (const char* bad : {R"([{"dtype": "float32", "shape": [-4], "offset": 0}])",
                          R"([{"dtype": "float32", "shape": [4294967296, 4294967296, 16], "offset": 0}])"}) {
    auto r = ReadTensors(*seg, nlohmann::json::parse(bad), "w");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().kind, ErrorKind::kBadInput);
  }
  EXPECT_FALSE(ShmSegment::Open("/etc/passwd", 10).ok());  // only parity's segments are mapped
}

TEST(Shm, SegmentsOfAProcessThatIsGoneAreSwept) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);  // a pid that is certainly gone
  auto mine = ShmSegment::Create(64);
  ASSERT_TRUE(mine.ok());
  const fs::path stale = fs::path(mine->path()).parent_path() / ("parity-shm-" + std::to_string(pid) + "-0");
  std::ofstream(stale) << "x";
  EXPECT_GE(SweepStaleSegments(), 1);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(mine->path()));  // a live owner's segment stays
}

TEST(Shm, PoolRefillsOnlyTensorsNobodyHolds) {
  TensorPool pool(2);
  at::Tensor a = pool.Take({4, 4}, at::kFloat);
  void* storage = a.data_ptr();
  at::Tensor held = pool.Take({4, 4}, at::kFloat);  // `a` is still held: a new one
  EXPECT_NE(held.data_ptr(), storage);
  a.reset();
  at::Tensor again = pool.Take({4, 4}, at::kFloat);  // `a` let go: refilled
  EXPECT_EQ(again.data_ptr(), storage);
  at::Tensor view = again.view({16});
  again.reset();
  EXPECT_NE(pool.Take({4, 4}, at::kFloat).data_ptr(), storage);  // a view of its storage is alive
  EXPECT_LE(pool.size(), 2u);
  EXPECT_NE(pool.Take({4, 4}, at::kDouble).scalar_type(), at::kFloat);
}

TEST(Shm, PoolHandsOutATensorOnlyInTheInferenceModeItWasMadeIn) {
  // A job server's eval experiment, then a train one: an inference tensor cannot be saved for
  // backward, so the train run gets a tensor of its own.
  TensorPool pool(4);
  void* made_in_inference = nullptr;
  {
    c10::InferenceMode guard;
    at::Tensor t = pool.Take({8}, at::kFloat);
    EXPECT_TRUE(t.is_inference());
    made_in_inference = t.data_ptr();
  }
  at::Tensor normal = pool.Take({8}, at::kFloat);
  EXPECT_FALSE(normal.is_inference());
  EXPECT_NE(normal.data_ptr(), made_in_inference);
  {
    c10::InferenceMode guard;
    EXPECT_EQ(pool.Take({8}, at::kFloat).data_ptr(), made_in_inference);  // refilled in its own mode
  }
}

}  // namespace
}  // namespace parity::runtime
