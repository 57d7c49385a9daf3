#include "util/csv.h"

#include <gtest/gtest.h>

#include "test_helpers.h"

namespace parity {
namespace {

TEST(Csv, ParsesPyTorchExpectedFiles) {
  auto t = ParseCsv("name,accuracy,graph_breaks\r\nBERT_pytorch,pass,0\n\nllama,fail_accuracy,3\n", "x.csv");
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->header, (std::vector<std::string>{"name", "accuracy", "graph_breaks"}));
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[1][1], "fail_accuracy");
  EXPECT_EQ(t->lines[1], 4);
  EXPECT_EQ(t->Column("graph_breaks"), 2);
  EXPECT_EQ(t->Column("speedup"), -1);
}

TEST(Csv, QuotedFieldsRoundTrip) {
  CsvTable t;
  t.header = {"name", "note"};
  t.rows = {{"a,b", "say \"hi\"\nnext"}, {"plain", ""}};
  auto back = ParseCsv(CsvText(t), "mem");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->rows, t.rows);
}

TEST(Csv, RaggedRowsAndOpenQuotesNameTheLine) {
  EXPECT_TRUE(testing::FailsWith(ParseCsv("name,accuracy\nx\n", "e.csv"), {"e.csv:2", "1 fields"}));
  EXPECT_TRUE(testing::FailsWith(ParseCsv("name,accuracy\n\"x,pass\n", "e.csv"), {"e.csv:2", "unterminated"}));
  EXPECT_TRUE(testing::FailsWith(ParseCsv("", "e.csv"), {"e.csv", "empty"}));
}

}  // namespace
}  // namespace parity
