# ring-agent acceptance tests (label agent): real etcd, real ring-agent
# processes with data dirs on disk, tables published by hand through
# libring (test_agent_env.h), and ring-coordinator for the end-to-end run.
# Each test starts its own etcd; they run one at a time (daemons, ports,
# timing). Included by tests/agent/CMakeLists.txt.
if(TARGET ring-agent)
  # test_agent_env.h's fixtures (agent_env.c), built once; tests/e2e links
  # them too. A benchmark that wants other ENV_TOKENS compiles agent_env.c
  # itself (tests/e2e/CMakeLists.txt).
  add_library(ringtest_agent STATIC ${CMAKE_CURRENT_LIST_DIR}/agent_env.c)
  target_include_directories(ringtest_agent PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  target_compile_definitions(ringtest_agent PUBLIC RING_AGENT_BIN="$<TARGET_FILE:ring-agent>")
  target_link_libraries(ringtest_agent PUBLIC ringtestfix)
  add_dependencies(ringtest_agent ring-agent)

  file(GLOB agent_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_agent_*.c)
  foreach(src ${agent_tests})
    get_filename_component(name ${src} NAME_WE)
    ring_test(${name} agent ${src})
    target_link_libraries(${name} PRIVATE ringtest_agent)
    if(name STREQUAL test_agent_harden) # signs requests as a peer would
      target_link_libraries(${name} PRIVATE ringarc)
    endif()
    if(TARGET ring-coordinator)
      target_compile_definitions(${name} PRIVATE
        RING_COORDINATOR_BIN="$<TARGET_FILE:ring-coordinator>")
      add_dependencies(${name} ring-coordinator)
    endif()
    set_tests_properties(${name} PROPERTIES RUN_SERIAL TRUE TIMEOUT 900)
  endforeach()
  # signs requests as a member would (arc_env.h: test_member_keys)
  target_link_libraries(test_agent_identity PRIVATE ringtest_arc)
endif()
