// The environment registry: every variable `tpcomm env` lists, validated typed access.
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/log_format.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {
namespace {

// Sets a variable for one test and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(EnvRegistry, ListsEveryVariableOfTheDesign) {
  for (const char* name :
       {"TPCOMM_LOG", "TPCOMM_LOG_SUBSYS", "TPCOMM_TIMEOUT_MS", "TPCOMM_TUNING",
        "TPCOMM_DUMP_FACTS", "TPCOMM_CHECK", "TPCOMM_DISABLE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
        "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
    EXPECT_NO_THROW(env_var(name)) << name;
    EXPECT_FALSE(env_var(name).meaning.empty()) << name;
  }
  EXPECT_THROW(env_var("TPCOMM_NOT_A_VARIABLE"), Error);
}

TEST(EnvRegistry, DefaultsApplyWhenUnset) {
  unsetenv("TPCOMM_TIMEOUT_MS");
  EXPECT_EQ(env_integer("TPCOMM_TIMEOUT_MS"), 60000);
  unsetenv("TPCOMM_CHECK");
  EXPECT_FALSE(env_flag("TPCOMM_CHECK"));
  unsetenv("TPCOMM_DISABLE");
  EXPECT_TRUE(env_list("TPCOMM_DISABLE").empty());
}

TEST(EnvRegistry, ValidValuesAreRead) {
  ScopedEnv timeout("TPCOMM_TIMEOUT_MS", "2500");
  ScopedEnv check("TPCOMM_CHECK", "1");
  ScopedEnv disable("TPCOMM_DISABLE", "custom, multimem");
  EXPECT_EQ(env_integer("TPCOMM_TIMEOUT_MS"), 2500);
  EXPECT_TRUE(env_flag("TPCOMM_CHECK"));
  EXPECT_EQ(env_list("TPCOMM_DISABLE"), (std::vector<std::string>{"custom", "multimem"}));
}

TEST(EnvRegistry, InvalidValuesNameTheVariable) {
  struct Case {
    const char* name;
    const char* value;
    const char* message;
  };
  for (const Case& c :
       {Case{"TPCOMM_TIMEOUT_MS", "soon", "TPCOMM_TIMEOUT_MS=soon: expected an integer"},
        Case{"TPCOMM_TIMEOUT_MS", "0", "expected an integer from 1 to 86400000"},
        Case{"TPCOMM_CHECK", "yes", "TPCOMM_CHECK=yes: expected 0 or 1"},
        Case{"TPCOMM_DISABLE", "custom,nccl", "'nccl' is not one of local, custom"},
        Case{"TPCOMM_LOG", "loud", "expected one of error, warn, info, debug"}}) {
    ScopedEnv e(c.name, c.value);
    try {
      env_string(c.name);
      ADD_FAILURE() << c.name << "=" << c.value << " must be refused";
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), ErrorCode::kInvalidInput);
      EXPECT_NE(std::string(err.what()).find(c.message), std::string::npos) << err.what();
    }
  }
}

TEST(Logging, DefaultLevelIsWarnAndDebugIsOff) {
  // The test process starts without TPCOMM_LOG (ctest does not set it).
  EXPECT_TRUE(log_enabled(LogLevel::kWarn, "plan"));
  EXPECT_FALSE(log_enabled(LogLevel::kDebug, "plan"));
  set_log_level(LogLevel::kDebug);
  EXPECT_TRUE(log_enabled(LogLevel::kDebug, "plan"));
  set_log_level(LogLevel::kWarn);
}

}  // namespace
}  // namespace tpcomm
