# ring-coordinator: the daemon (coord.h maps its parts).
add_executable(ring-coordinator
  coord_main.c
  coord_lead.c
  coord_member.c
  coord_propose.c
  coord_run.c
  coord_stuck.c
  coord_missing.c
  coord_publish.c
  coord_gc.c
  coord_metrics.c
  coord_status.c
  coord_restore.c
)
target_link_libraries(ring-coordinator PRIVATE ringcluster ringdaemon ring_static
                      PkgConfig::XXHASH m)
install(TARGETS ring-coordinator RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
