#include "runtime/jobs.h"

#include <gtest/gtest.h>

namespace parity::runtime {
namespace {

using Env = std::vector<std::vector<std::string>>;

TEST(Jobs, OneSlotGetsNothing) { EXPECT_EQ(SlotEnvironments(1, true, 8, "", 16), Env(1)); }

TEST(Jobs, EachSlotGetsItsOwnGpu) {
  EXPECT_EQ(SlotEnvironments(2, true, 2, "", 16), (Env{{"CUDA_VISIBLE_DEVICES=0"}, {"CUDA_VISIBLE_DEVICES=1"}}));
  // The GPUs this process may use, round robin.
  EXPECT_EQ(SlotEnvironments(3, true, 2, "4,6", 16),
            (Env{{"CUDA_VISIBLE_DEVICES=4"}, {"CUDA_VISIBLE_DEVICES=6"}, {"CUDA_VISIBLE_DEVICES=4"}}));
  // One GPU: every slot shares it, nothing to pin.
  EXPECT_EQ(SlotEnvironments(2, true, 1, "", 16), Env(2));
}

TEST(Jobs, EightGpusAndMoreSlotsThanGpus) {
  const Env eight = SlotEnvironments(8, true, 8, "", 128);
  ASSERT_EQ(eight.size(), 8u);
  for (size_t k = 0; k < 8; ++k) EXPECT_EQ(eight[k], std::vector<std::string>{"CUDA_VISIBLE_DEVICES=" + std::to_string(k)});
  // -j 4 on 2 GPUs: two slots per GPU, each GPU as busy as the other.
  EXPECT_EQ(SlotEnvironments(4, true, 2, "", 32), (Env{{"CUDA_VISIBLE_DEVICES=0"}, {"CUDA_VISIBLE_DEVICES=1"},
                                                       {"CUDA_VISIBLE_DEVICES=0"}, {"CUDA_VISIBLE_DEVICES=1"}}));
  const Env sixteen = SlotEnvironments(16, true, 8, "", 128);
  ASSERT_EQ(sixteen.size(), 16u);
  for (size_t k = 0; k < 16; ++k) EXPECT_EQ(sixteen[k], std::vector<std::string>{"CUDA_VISIBLE_DEVICES=" + std::to_string(k % 8)});
}

TEST(Jobs, CpuSlotsSplitTheThreads) {
  EXPECT_EQ(SlotEnvironments(2, false, 0, "", 16),
            (Env{{"OMP_NUM_THREADS=8", "MKL_NUM_THREADS=8"}, {"OMP_NUM_THREADS=8", "MKL_NUM_THREADS=8"}}));
  EXPECT_EQ(SlotEnvironments(4, false, 0, "", 2)[3], (std::vector<std::string>{"OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1"}));
}

}  // namespace
}  // namespace parity::runtime
