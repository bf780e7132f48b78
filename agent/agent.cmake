# ring-agent: the daemon (agent.h maps its parts). Included by
# agent/CMakeLists.txt once the ringarc library is defined.
add_executable(ring-agent
  agent_main.c      # options, start-up, the loop, SIGTERM
  agent_member.c    # alive/<id> under a lease; re-registering; health
  agent_follow.c    # the live watcher, the config, jobs from pending entries
  agent_pins.c      # the keys pinned for other nodes in nodes/
  agent_fetchers.c  # the fetch worker pool
  agent_own.c       # explicit ownership: empty arcs granted with nothing to copy; missing ones
  agent_refill.c    # missing owned arcs: refilled from the other owners; missing/<id>
  agent_sizes.c     # sizes/<id>: the bytes of each owned arc held, for plans' estimates
  agent_report.c    # progress/<id>
  agent_gc.c        # drops after the grace; temporary leftovers
  agent_metrics.c   # /metrics and /healthz
  agent_restore.c   # a restored etcd: saved marks, the probe, recovery/<id>
)
target_include_directories(ring-agent PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
                           ${PROJECT_SOURCE_DIR}/proto)
target_link_libraries(ring-agent PRIVATE ringarc ringdaemon ring_static m)
install(TARGETS ring-agent RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT agent)
