# Fails when a layer includes a header of a layer it may not depend on (DESIGN.md: Layers).
# facts: pure (may use common). plan: facts + common only, no I/O, no probe, no sockets.
# probe: facts + common.
set(_rules
  "facts|tpcomm/(plan|probe|tuning|control|runtime|transport)|sys/socket|netinet|dlfcn|fstream"
  "plan|tpcomm/(probe|control|runtime|transport|env)|sys/socket|netinet|dlfcn|fstream|cstdio|iostream|unistd"
  "probe|tpcomm/(plan|tuning|control|runtime|transport)")
set(_failed "")
foreach(_rule IN LISTS _rules)
  string(REPLACE "|" ";" _parts "${_rule}")
  list(GET _parts 0 _layer)
  list(REMOVE_AT _parts 0)
  string(REPLACE ";" "|" _forbidden "${_parts}")
  file(GLOB_RECURSE _files "${SOURCE_DIR}/src/${_layer}/*.cpp" "${SOURCE_DIR}/src/${_layer}/*.hpp")
  foreach(_f IN LISTS _files)
    file(STRINGS "${_f}" _includes REGEX "^[ \t]*#[ \t]*include")
    foreach(_inc IN LISTS _includes)
      if(_inc MATCHES "[<\"](${_forbidden})")
        string(APPEND _failed "\n  ${_f}: '${_inc}' is not allowed in layer ${_layer}")
      endif()
    endforeach()
  endforeach()
endforeach()
if(_failed)
  message(FATAL_ERROR "Layering violation (see DESIGN.md, Layers):${_failed}")
endif()
