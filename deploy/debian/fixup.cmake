# CPack's post-build step for the library's package (deploy/packaging.cmake,
# CPACK_POST_BUILD_SCRIPTS): what CPack 3.25 cannot say. It adds
# `Multi-Arch: same` (co-installable across architectures: its files are in
# the multiarch folder) and drops the postinst and postrm CPack writes to
# call ldconfig, which the package's dpkg trigger (debian/triggers) already
# runs. The package is rebuilt with dpkg-deb from its raw contents.
foreach(deb IN LISTS CPACK_PACKAGE_FILES)
  get_filename_component(name "${deb}" NAME)
  if(NOT name MATCHES "^${CPACK_RING_DEB_LIB}_")
    continue()
  endif()
  set(raw "${deb}.raw")
  file(REMOVE_RECURSE "${raw}")
  execute_process(COMMAND dpkg-deb -R "${deb}" "${raw}" COMMAND_ERROR_IS_FATAL ANY)
  file(READ "${raw}/DEBIAN/control" control)
  if(NOT control MATCHES "\nMulti-Arch:")
    string(STRIP "${control}" control) # CPack ends it with a blank line: a second stanza
    file(WRITE "${raw}/DEBIAN/control" "${control}\nMulti-Arch: same\n")
  endif()
  file(REMOVE "${raw}/DEBIAN/postinst" "${raw}/DEBIAN/postrm")
  execute_process(COMMAND dpkg-deb --root-owner-group -b "${raw}" "${deb}"
                  OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
  file(REMOVE_RECURSE "${raw}")
endforeach()
