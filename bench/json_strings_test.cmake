# synthetic_train's --json line must stay valid JSON whatever the user's text:
# runs it on a shapes file whose path holds a quote, a backslash, a tab and
# non-ASCII letters, parses the line and compares "workload" with the path.
#
# cmake -DMPIRUN=<mpirun and its flags, joined by '|'> -DTRAINER=<binary>
#       -DWORK_DIR=<scratch directory> -P json_strings_test.cmake

string(REPLACE "|" ";" mpirun "${MPIRUN}")
set(path "${WORK_DIR}/odd \"shapes\" \\ tab\tnoël-形状.txt")
# file(WRITE) would take the backslash for a directory separator.
file(REMOVE_RECURSE "${WORK_DIR}")
file(WRITE "${WORK_DIR}/shapes.txt"
  "layer1.weight 16 8\nlayer1.bias 16\nlayer2.weight 4 16\n")
file(RENAME "${WORK_DIR}/shapes.txt" "${path}")

execute_process(
  COMMAND ${mpirun} "${TRAINER}" --tensors "${path}" --warmup-steps 1
    --measure-steps 2 --json
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "synthetic_train failed (${rc}):\n${out}\n${err}")
endif()
string(STRIP "${out}" line)
# JSON strings escape control characters; CMake's parser would let them by.
set(control_chars "")
foreach(code RANGE 1 31)
  string(ASCII ${code} char)
  string(APPEND control_chars "${char}")
endforeach()
if(line MATCHES "[${control_chars}]")
  message(FATAL_ERROR "a raw control character in the JSON line:\n${line}")
endif()
string(JSON workload ERROR_VARIABLE json_error GET "${line}" workload)
if(json_error)
  message(FATAL_ERROR "not valid JSON (${json_error}):\n${line}")
endif()
if(NOT workload STREQUAL path)
  message(FATAL_ERROR "workload is '${workload}', expected '${path}':\n${line}")
endif()
foreach(field_type IN ITEMS "samples_per_sec=NUMBER" "config=OBJECT"
    "autotune=OBJECT")
  string(REPLACE "=" ";" field_type "${field_type}")
  list(GET field_type 0 field)
  list(GET field_type 1 want)
  string(JSON type TYPE "${line}" ${field})
  if(NOT type STREQUAL want)
    message(FATAL_ERROR "${field} is ${type}, expected ${want}:\n${line}")
  endif()
endforeach()
message(STATUS "valid JSON, workload '${workload}'")
