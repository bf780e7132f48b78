# ringctl: one file per command (cmd_<name>.c, listed in ringctl.c's command
# table) over what the commands share. A new command adds its files here.

# The option reader, dispatch and exit codes every command uses.
set(RINGCTL_CORE
  ringctl.c
  ringctl_args.c
)

# `ringctl simulate`: placement schemes compared offline.
set(RINGCTL_SIMULATE
  cmd_simulate.c
  simulate.c
  simulate_schemes.c
  simulate_tokens.c
  simulate_zipf.c
  simulate_bounded.c
  simulate_report.c
)

set(RINGCTL_SOURCES ${RINGCTL_CORE} ${RINGCTL_SIMULATE})

add_executable(ringctl ${RINGCTL_SOURCES})
target_include_directories(ringctl PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(ringctl PRIVATE ringcluster ring_static PkgConfig::CJSON PkgConfig::XXHASH m)

install(TARGETS ringctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
