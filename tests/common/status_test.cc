// SPDX-License-Identifier: Apache-2.0
// Status and Result: errors as values, and Result::value()'s contract on an error (issue 13:
// it used to throw std::bad_variant_access although status.h promises no exceptions).
#include "tierflow/status.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace tierflow {
namespace {

TEST(Result, HoldsAValueOrTheError) {
  Result<std::string> v(std::string("tier"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "tier");
  EXPECT_EQ(v->size(), 4u);
  EXPECT_TRUE(v.status().ok());
  Result<std::string> e(Status::NotFound("node 9 does not exist"));
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(e.status().ToString(), "not_found: node 9 does not exist");
  Result<std::unique_ptr<int>> moved(std::make_unique<int>(7));
  std::unique_ptr<int> p = std::move(moved).value();
  EXPECT_EQ(*p, 7);
}

TEST(Result, BuiltFromAnOkStatusIsAnInternalError) {
  Result<int> r(Status::Ok());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(ResultDeathTest, ValueOfAnErrorAbortsWithTheErrorAndThrowsNothing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Result<int> e(Status::InvalidArgument("--rows 0: use 1 .. 2^32"));
  EXPECT_DEATH((void)e.value(), "value\\(\\) called on an error .*invalid_argument: --rows 0");
  const Result<int>& c = e;
  EXPECT_DEATH((void)*c, "called on an error");
  EXPECT_DEATH((void)std::move(e).value(), "called on an error");
}

}  // namespace
}  // namespace tierflow
