# ringctl: one file per command (cmd_<name>.c, listed in ringctl.c's command
# table) over what the commands share. A new command adds its files here.

# The option reader, dispatch and exit codes every command uses.
set(RINGCTL_CORE
  ringctl.c
  ringctl_args.c
)

# What the etcd commands share: the session (ringctl_etcd.c) and printing
# (ringctl_out.c: JSON and units; nodes, plans and runs in their own files).
set(RINGCTL_SHARED
  ringctl_etcd.c
  ringctl_out.c
  ringctl_nodes.c
  ringctl_plansum.c
  ringctl_runs.c
  ringctl_stuck.c
  ringctl_missing.c
  ringctl_plans.c
  ringctl_node_edit.c
)

# The commands that read and write a cluster in etcd.
set(RINGCTL_ETCD_COMMANDS
  cmd_init.c
  cmd_status.c
  cmd_members.c
  cmd_plan.c
  cmd_whatif.c
  cmd_apply.c
  ringctl_wait.c
  cmd_run.c
  cmd_accept_loss.c
  cmd_recover.c
  ringctl_restore.c
  cmd_drain.c
  cmd_weight.c
  cmd_throttle.c
  cmd_lookup.c
  cmd_history.c
  cmd_verify.c
  cmd_render.c
  render_svg.c
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

set(RINGCTL_SOURCES ${RINGCTL_CORE} ${RINGCTL_SHARED} ${RINGCTL_ETCD_COMMANDS}
    ${RINGCTL_SIMULATE})

add_executable(ringctl ${RINGCTL_SOURCES})
target_include_directories(ringctl PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(ringctl PRIVATE ringcluster ringdaemon ring_static PkgConfig::CJSON PkgConfig::XXHASH m)

install(TARGETS ringctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
