# SPDX-License-Identifier: Apache-2.0
# libtierflow_rma: one interposition library per MPI found (Open MPI and MPICH, Debian's
# packages, side by side). Each MPI's compiler wrapper says where its headers and library are;
# the same sources are compiled against each. An MPI that is not installed is skipped with a
# message, so the rest of tierflow builds without any.
option(TIERFLOW_BUILD_RMA "Build libtierflow_rma for each MPI found" ON)

# What the library needs of tierflow is compiled in again (Status, the coherence instructions,
# the copy kernels): it is preloaded into programs that do not link tierflow.
add_library(tierflow_rma_core STATIC src/rma/shared_segment.cc src/rma/window_sync.cc src/rma/pool.cc
            src/rma/range_set.cc src/rma/write_ledger.cc
            src/common/status.cc src/common/fault_guard.cc src/common/mapping.cc src/common/size.cc
            src/coherence/coherence.cc src/coherence/lines.cc src/kernels/kernels.cc
            src/kernels/isa.cc src/kernels/kernels_baseline.cc src/kernels/kernels_avx2.cc
            src/kernels/kernels_avx512.cc src/kernels/copy_recoverable.cc src/common/crc32c.cc
            src/engine/operation.cc)
target_include_directories(tierflow_rma_core PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(tierflow_rma_core PUBLIC fmt::fmt Threads::Threads)

# The files that hold the coherence hooks (rma/mpi/coherence.h) apart from the rest: the test
# build compiles them again once per hook left out (the mutants).
set(TIERFLOW_RMA_MPI_SOURCES)
foreach(f registry create transfer datatype accumulate offload hybrid pooled reach)
  list(APPEND TIERFLOW_RMA_MPI_SOURCES ${PROJECT_SOURCE_DIR}/src/rma/mpi/${f}.cc)
endforeach()
set(TIERFLOW_RMA_HOOK_SOURCES ${PROJECT_SOURCE_DIR}/src/rma/mpi/sync.cc
    ${PROJECT_SOURCE_DIR}/src/rma/mpi/access.cc ${PROJECT_SOURCE_DIR}/src/rma/mpi/coherence.cc)
set(TIERFLOW_RMA_MPIS)

# tierflow_find_mpi(NAME WRAPPER SHOW_FLAG LAUNCHER): NAME_INCLUDE_DIRS, NAME_LINK_DIRS,
# NAME_LIBS and NAME_LAUNCHER from the wrapper's command line.
function(tierflow_find_mpi name wrapper show launcher)
  find_program(${name}_WRAPPER ${wrapper})
  find_program(${name}_LAUNCHER ${launcher})
  if(NOT ${name}_WRAPPER OR NOT ${name}_LAUNCHER)
    message(STATUS "tierflow_rma: ${wrapper} or ${launcher} not found: no library for ${name}")
    return()
  endif()
  execute_process(COMMAND ${${name}_WRAPPER} ${show} OUTPUT_VARIABLE line
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(STATUS "tierflow_rma: ${wrapper} ${show} failed: no library for ${name}")
    return()
  endif()
  separate_arguments(words UNIX_COMMAND "${line}")
  set(inc)
  set(dirs)
  set(libs)
  foreach(w ${words})
    if(w MATCHES "^-I(.+)")
      list(APPEND inc ${CMAKE_MATCH_1})
    elseif(w MATCHES "^-L(.+)")
      list(APPEND dirs ${CMAKE_MATCH_1})
    elseif(w MATCHES "^-l(.+)")
      list(APPEND libs ${CMAKE_MATCH_1})
    endif()
  endforeach()
  set(${name}_INCLUDE_DIRS ${inc} PARENT_SCOPE)
  set(${name}_LINK_DIRS ${dirs} PARENT_SCOPE)
  set(${name}_LIBS ${libs} PARENT_SCOPE)
  set(TIERFLOW_RMA_MPIS ${TIERFLOW_RMA_MPIS} ${name} PARENT_SCOPE)
endfunction()

if(TIERFLOW_BUILD_RMA)
  tierflow_find_mpi(openmpi mpicc.openmpi --showme mpirun.openmpi)
  tierflow_find_mpi(mpich mpicc.mpich -show mpiexec.mpich)
endif()

# tierflow_mpi_target(TARGET MPI): compiles and links TARGET against that MPI.
function(tierflow_mpi_target target mpi)
  target_include_directories(${target} SYSTEM PRIVATE ${${mpi}_INCLUDE_DIRS})
  # The C API only: Open MPI's deprecated C++ bindings would need libmpi_cxx.
  target_compile_definitions(${target} PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
  target_link_directories(${target} PRIVATE ${${mpi}_LINK_DIRS})
  target_link_libraries(${target} PRIVATE ${${mpi}_LIBS})
endfunction()

# tierflow_rma_library(NAME MPI [MUTANTS]): the library against that MPI. MUTANTS: the test
# build's library that leaves out the coherence hook TIERFLOW_RMA_LEAVE_OUT names.
function(tierflow_rma_library name mpi)
  cmake_parse_arguments(L "MUTANTS" "" "" ${ARGN})
  # The mutants' library links objects of its own, without link-time optimisation: an LTO link
  # of the same code would cost a minute of every test run and test nothing more.
  set(objects tierflow_rma_${mpi}_objects)
  if(L_MUTANTS)
    set(objects tierflow_rma_${mpi}_mutant_objects)
    if(NOT TARGET ${objects})
      tierflow_rma_objects(${objects} ${mpi})
    endif()
  endif()
  add_library(${name} SHARED $<TARGET_OBJECTS:${objects}> ${TIERFLOW_RMA_HOOK_SOURCES})
  tierflow_mpi_target(${name} ${mpi})
  # libtierflow: the engines that large puts and gets are offloaded to (rma/mpi/offload.h),
  # found beside the library once installed.
  target_link_libraries(${name} PRIVATE tierflow_rma_core tierflow fmt::fmt)
  set_target_properties(${name} PROPERTIES INSTALL_RPATH "\$ORIGIN")
  if(L_MUTANTS)
    target_compile_definitions(${name} PRIVATE TIERFLOW_RMA_MUTANTS=1)
  elseif(NOT TIERFLOW_SANITIZE)
    # Link-time optimisation inlines the checks of access.cc into every put and get: they are
    # most of a small put's cost.
    set_target_properties(${name} ${objects} PROPERTIES INTERPROCEDURAL_OPTIMIZATION ON)
  endif()
  set_target_properties(${name} PROPERTIES LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/tierflow_rma.map)
  # Only the MPI_* entry points are visible: the library's own symbols must not interpose on
  # a program's (or libtierflow's) when it is preloaded.
  target_link_options(${name} PRIVATE -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/tierflow_rma.map)
endfunction()

function(tierflow_rma_objects name mpi)
  add_library(${name} OBJECT ${TIERFLOW_RMA_MPI_SOURCES})
  tierflow_mpi_target(${name} ${mpi})
  target_link_libraries(${name} PRIVATE tierflow_rma_core tierflow fmt::fmt)
endfunction()

foreach(mpi ${TIERFLOW_RMA_MPIS})
  tierflow_rma_objects(tierflow_rma_${mpi}_objects ${mpi})
  tierflow_rma_library(tierflow_rma_${mpi} ${mpi})
  set_target_properties(tierflow_rma_${mpi} PROPERTIES VERSION ${PROJECT_VERSION}
                        SOVERSION ${PROJECT_VERSION_MAJOR})
  install(TARGETS tierflow_rma_${mpi} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endforeach()

# The MPI program `tierflow bench rma` runs under each MPI, with and without the library.
foreach(mpi ${TIERFLOW_RMA_MPIS})
  add_executable(rma_latency_${mpi} bench/rma/rma_latency.cc)
  tierflow_mpi_target(rma_latency_${mpi} ${mpi})
endforeach()

# The applications of the thesis (apps/ft, apps/ca): MPI programs built against each MPI like
# the libraries, run with and without them by `tierflow bench rma --apps`. FT's 1-D transforms
# are FFTW3's (Debian libfftw3-dev, which `make setup` installs).
option(TIERFLOW_BUILD_RMA_APPS "Build the MPI applications (NAS FT, the cellular automaton)" ON)
pkg_check_modules(FFTW3 QUIET IMPORTED_TARGET fftw3)
if(TIERFLOW_RMA_MPIS AND NOT FFTW3_FOUND)
  message(STATUS "tierflow-ft: FFTW3 not found (libfftw3-dev): NAS FT is not built")
endif()
set(TIERFLOW_RMA_APPS)
# tierflow_rma_app(NAME MPI SOURCES...): tierflow-NAME-MPI, built against that MPI.
function(tierflow_rma_app name mpi)
  set(target tierflow_${name}_${mpi})
  add_executable(${target} ${ARGN} apps/mpiapp/report.cc)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/apps)
  tierflow_mpi_target(${target} ${mpi})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME tierflow-${name}-${mpi})
  set(TIERFLOW_RMA_APPS ${TIERFLOW_RMA_APPS} ${target} PARENT_SCOPE)
endfunction()
foreach(mpi ${TIERFLOW_RMA_MPIS})
  if(NOT TIERFLOW_BUILD_RMA_APPS)
    break()
  endif()
  if(FFTW3_FOUND)
    tierflow_rma_app(ft ${mpi} apps/ft/main.cc apps/ft/solver.cc apps/ft/transpose.cc
                     apps/ft/npb.cc)
    target_link_libraries(tierflow_ft_${mpi} PRIVATE PkgConfig::FFTW3)
  endif()
  tierflow_rma_app(ca ${mpi} apps/ca/main.cc apps/ca/automaton.cc apps/ca/grid.cc)
  # The distributed sort: the single-node sort's stages (tierflow_sort) over MPI.
  if(TARGET tierflow_sort)
    tierflow_rma_app(dsort ${mpi} apps/dsort/main.cc apps/dsort/dsort.cc
                     apps/dsort/exchange.cc apps/dsort/publish.cc apps/dsort/splitters.cc)
    target_include_directories(tierflow_dsort_${mpi} PRIVATE ${CLI11_INCLUDE_DIR})
    target_link_libraries(tierflow_dsort_${mpi} PRIVATE tierflow_sort fmt::fmt
                          nlohmann_json::nlohmann_json)
  endif()
endforeach()
install(TARGETS ${TIERFLOW_RMA_APPS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# `tierflow bench rma` finds each MPI's launcher, the MPI program and the library (beside it in
# the build tree; libexec/tierflow and the library directory once installed).
if(TIERFLOW_BUILD_TOOLS)
  set(launchers)
  foreach(mpi ${TIERFLOW_RMA_MPIS})
    list(APPEND launchers "${mpi}=${${mpi}_LAUNCHER}")
    add_dependencies(tierflow_cli rma_latency_${mpi} tierflow_rma_${mpi})
    install(TARGETS rma_latency_${mpi} RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/tierflow)
  endforeach()
  if(TIERFLOW_RMA_APPS)
    add_dependencies(tierflow_cli ${TIERFLOW_RMA_APPS})
  endif()
  string(JOIN "," launchers ${launchers})
  target_compile_definitions(tierflow_cli PRIVATE TIERFLOW_RMA_LAUNCHERS="${launchers}"
                             TIERFLOW_INSTALL_LIBDIR="${CMAKE_INSTALL_LIBDIR}"
                             TIERFLOW_INSTALL_LIBEXECDIR="${CMAKE_INSTALL_LIBEXECDIR}")
endif()
