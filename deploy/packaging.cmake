# Debian packages: `cpack -G DEB` in a build tree (README, "Debian
# packages"). Five packages from the install components:
#
#   libring<SOVERSION>      lib          the shared library (named after its SONAME),
#                                        Multi-Arch: same, in lib/<triplet>
#   libring-dev             dev          headers, pkg-config, CMake package, static library
#   ringkeeper-coordinator  coordinator  ring-coordinator, ringctl, unit, sample config,
#                                        manual pages, completion
#   ringkeeper-agent        agent        ring-agent, unit, sample config, manual page
#   python3-ringkeeper      python       the Python binding (bindings/python), arch all
#
# Binaries go under /usr (CPack's prefix for DEB, whatever the build's
# CMAKE_INSTALL_PREFIX). What only a Debian system wants (units in
# /lib/systemd/system, sysusers, /etc samples, /usr/share/doc files) is
# installed with absolute paths and EXCLUDE_FROM_ALL: CPack installs it per
# component, a plain `cmake --install` never writes it outside its prefix.
# Run-time dependencies are found by dpkg-shlibdeps from the binaries.

set(RING_DEB_MAINTAINER "Ringkeeper maintainers <ringkeeper@example.org>"
    CACHE STRING "Maintainer field of the Debian packages")
set(RING_DEB_UNITDIR /lib/systemd/system) # Debian 12's systemd unit directory

get_target_property(ring_soversion ring SOVERSION)
set(RING_DEB_LIB libring${ring_soversion})
set(RING_DEB_RELEASE 1)
set(RING_DEB_VERSION ${PROJECT_VERSION}-${RING_DEB_RELEASE})
set(RING_DEB_DIR ${CMAKE_CURRENT_BINARY_DIR}/debian)

# ---------------------------------------------- what each package documents

# /usr/share/doc/<package>/: copyright and changelog.Debian.gz, which
# every Debian package carries.
string(TIMESTAMP ring_deb_date "%a, %d %b %Y %H:%M:%S +0000" UTC) # SOURCE_DATE_EPOCH wins
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/debian/changelog.in ${RING_DEB_DIR}/changelog @ONLY)
add_custom_command(OUTPUT ${RING_DEB_DIR}/changelog.Debian.gz
  COMMAND gzip -9n -c ${RING_DEB_DIR}/changelog > ${RING_DEB_DIR}/changelog.Debian.gz
  DEPENDS ${RING_DEB_DIR}/changelog)
add_custom_target(deb-changelog ALL DEPENDS ${RING_DEB_DIR}/changelog.Debian.gz)

# The lintian overrides (debian/lintian-overrides.in) say why each is there.
function(ring_deb_docs component package)
  install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/debian/copyright
                ${RING_DEB_DIR}/changelog.Debian.gz
          DESTINATION /usr/share/doc/${package} COMPONENT ${component} EXCLUDE_FROM_ALL)
  set(RING_DEB_PACKAGE ${package})
  configure_file(${CMAKE_CURRENT_SOURCE_DIR}/debian/lintian-overrides.in
                 ${RING_DEB_DIR}/${package}/lintian-overrides @ONLY)
  install(FILES ${RING_DEB_DIR}/${package}/lintian-overrides
          DESTINATION /usr/share/lintian/overrides RENAME ${package}
          COMPONENT ${component} EXCLUDE_FROM_ALL)
endfunction()

# ------------------------------------------------------------ a daemon's files

# The unit (ExecStart on the packaged binary), sysusers, the sample config
# (a conffile) and the maintainer scripts of a daemon's package: the user
# (sysusers, else adduser), the unit handled on install, upgrade, removal
# and purge as deb-systemd-helper and deb-systemd-invoke do it.
function(ring_deb_daemon component package daemon)
  file(READ ${CMAKE_CURRENT_SOURCE_DIR}/systemd/${daemon}.service unit)
  string(REPLACE "/usr/local/bin/" "/usr/bin/" unit "${unit}")
  file(WRITE ${RING_DEB_DIR}/${package}/${daemon}.service "${unit}")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               ${CMAKE_CURRENT_SOURCE_DIR}/systemd/${daemon}.service)
  install(FILES ${RING_DEB_DIR}/${package}/${daemon}.service
          DESTINATION ${RING_DEB_UNITDIR} COMPONENT ${component} EXCLUDE_FROM_ALL)
  # Both daemons' packages declare the one user, each in a file of its own,
  # so either installs alone; systemd-sysusers takes the same line twice.
  install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/systemd/ringkeeper.sysusers
          DESTINATION /usr/lib/sysusers.d RENAME ${package}.conf
          COMPONENT ${component} EXCLUDE_FROM_ALL)
  install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/${daemon}.conf
          DESTINATION /etc/ringkeeper COMPONENT ${component} EXCLUDE_FROM_ALL)
  file(WRITE ${RING_DEB_DIR}/${package}/conffiles "/etc/ringkeeper/${daemon}.conf\n")
  set(RING_DEB_PACKAGE ${package})
  set(RING_DEB_DAEMON ${daemon})
  set(scripts)
  foreach(script postinst prerm postrm)
    configure_file(${CMAKE_CURRENT_SOURCE_DIR}/debian/${script}.in
                   ${RING_DEB_DIR}/${package}/${script} @ONLY)
    list(APPEND scripts ${RING_DEB_DIR}/${package}/${script})
  endforeach()
  string(TOUPPER ${component} c)
  set(CPACK_DEBIAN_${c}_PACKAGE_CONTROL_EXTRA ${RING_DEB_DIR}/${package}/conffiles ${scripts}
      PARENT_SCOPE)
  # postinst's adduser where systemd-sysusers is absent (not a Depends on
  # systemd: the binaries run without it, in a container).
  set(CPACK_DEBIAN_${c}_PACKAGE_DEPENDS adduser PARENT_SCOPE)
  ring_deb_docs(${component} ${package})
endfunction()

ring_deb_docs(lib ${RING_DEB_LIB})
# The library's package asks dpkg for the ldconfig trigger; the postinst and
# postrm CPack adds to call ldconfig too are dropped after the build, where
# Multi-Arch is added (debian/fixup.cmake).
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_SOURCE_DIR}/debian/triggers)
set(CPACK_POST_BUILD_SCRIPTS ${CMAKE_CURRENT_SOURCE_DIR}/debian/fixup.cmake)
set(CPACK_RING_DEB_LIB ${RING_DEB_LIB}) # CPack hands CPACK_* variables to the script
ring_deb_docs(dev libring-dev)
ring_deb_daemon(coordinator ringkeeper-coordinator ring-coordinator)
ring_deb_daemon(agent ringkeeper-agent ring-agent)

# The Python binding where Debian's python3 finds it, with the metadata pip
# and importlib.metadata read (the version is the project's, as
# ringkeeper/_version.py says and its tests check).
set(RING_PY_DIST /usr/lib/python3/dist-packages)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/bindings/python/ringkeeper DESTINATION ${RING_PY_DIST}
        COMPONENT python EXCLUDE_FROM_ALL PATTERN __pycache__ EXCLUDE)
file(WRITE ${RING_DEB_DIR}/python/METADATA "Metadata-Version: 2.1
Name: ringkeeper
Version: ${PROJECT_VERSION}
Summary: Python binding of libring, Ringkeeper's fixed-token ring
Requires-Dist: cffi (>=1.15)
")
file(WRITE ${RING_DEB_DIR}/python/top_level.txt "ringkeeper\n")
file(WRITE ${RING_DEB_DIR}/python/INSTALLER "dpkg\n")
install(FILES ${RING_DEB_DIR}/python/METADATA ${RING_DEB_DIR}/python/top_level.txt
              ${RING_DEB_DIR}/python/INSTALLER
        DESTINATION ${RING_PY_DIST}/ringkeeper-${PROJECT_VERSION}.dist-info
        COMPONENT python EXCLUDE_FROM_ALL)
ring_deb_docs(python python3-ringkeeper)

# ------------------------------------------------------------------- CPack

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ringkeeper)
set(CPACK_PACKAGE_VENDOR Ringkeeper)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${RING_DEB_MAINTAINER}")
set(CPACK_STRIP_FILES ON) # the packages carry no debug info (lintian: unstripped binaries)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL lib dev coordinator agent python)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${RING_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_SOURCE ringkeeper)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE) # maintainer scripts 0755, the rest 0644

set(CPACK_DEBIAN_LIB_PACKAGE_NAME ${RING_DEB_LIB})
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_DESCRIPTION "Ringkeeper's fixed-token ring for data-plane services
libring routes keys to their owners in a fixed-token consistent-hashing
table kept in etcd: key lookup, the table codec, a lock-free live table
holder, the planner and an etcd client that follows table versions.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libring-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "${RING_DEB_LIB} (= ${RING_DEB_VERSION}), libxxhash-dev, libcjson-dev, libcurl4-openssl-dev | libcurl-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION "Ringkeeper's fixed-token ring - development files
Headers, the pkg-config file (libring), the CMake package
(find_package(Ringkeeper)) and the static library for building services
that route keys with libring.")

set(CPACK_DEBIAN_COORDINATOR_PACKAGE_NAME ringkeeper-coordinator)
set(CPACK_DEBIAN_COORDINATOR_PACKAGE_SECTION net)
# The coordinator keeps its state in etcd: on a single host (a trial, a
# small cluster) the local etcd is what it talks to.
set(CPACK_DEBIAN_COORDINATOR_PACKAGE_RECOMMENDS etcd-server)
set(CPACK_DEBIAN_COORDINATOR_DESCRIPTION "Ringkeeper coordinator daemon and ringctl
ring-coordinator keeps a sharded service's placement in etcd: membership,
down detection, minimal and failure-domain-aware plans, and throttled
migrations. ringctl is the operator's command line for it. Includes the
systemd unit, a sample config, manual pages and shell completion.")

set(CPACK_DEBIAN_AGENT_PACKAGE_NAME ringkeeper-agent)
set(CPACK_DEBIAN_AGENT_PACKAGE_SECTION net)
set(CPACK_DEBIAN_AGENT_DESCRIPTION "Ringkeeper agent daemon for each data host
ring-agent registers its host in etcd, follows the ring, streams the data
arcs its host is given from their owners and serves its own, signed with
the cluster secret. Includes the systemd unit, a sample config and the
manual page.")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-ringkeeper)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS
    "python3:any, python3-cffi, ${RING_DEB_LIB} (>= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_PYTHON_PACKAGE_RECOMMENDS python3-xxhash) # the in-place lookup path
set(CPACK_DEBIAN_PYTHON_DESCRIPTION "Ringkeeper's fixed-token ring - Python binding
The ringkeeper module calls libring through cffi: decode a table, look keys
up (owners, write set, read replica), route with bounded loads, and follow
a cluster's table in etcd live.")

include(CPack)
