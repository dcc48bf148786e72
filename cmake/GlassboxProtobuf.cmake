# Protobuf for glassbox's generated code (TensorBoard records, ONNX, Triton model configs).
#
# The torch wheel ships its own, older protobuf headers in torch/include/google/protobuf, and
# LibTorch's include directories come first on every target that links gb_torch. A directory
# that calls gb_use_system_protobuf() sees the system protobuf's headers first, through a folder
# that holds nothing but a link to them (-isystem /usr/include itself would break
# #include_next). The LibTorch headers glassbox includes (the precompiled <torch/torch.h>) use
# no protobuf.
find_package(Protobuf REQUIRED GLOBAL)

function(gb_use_system_protobuf)
  set(_dir ${CMAKE_BINARY_DIR}/protobuf_include)
  if(NOT EXISTS ${_dir}/google)
    file(MAKE_DIRECTORY ${_dir})
    file(CREATE_LINK ${Protobuf_INCLUDE_DIR}/google ${_dir}/google SYMBOLIC)
  endif()
  include_directories(BEFORE SYSTEM ${_dir})
endfunction()

# gb_add_proto_library(NAME PROTOS a/b.proto ...): C++ from .proto files (paths relative to the
# repository root, so generated headers are included as "glassbox/<module>/proto/x.pb.h") into
# a static library of its own: generated code is not held to our -Werror warnings, and its
# headers are SYSTEM includes.
function(gb_add_proto_library name)
  cmake_parse_arguments(GB "" "" "PROTOS" ${ARGN})
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/${name}_gen)
  set(_generated "")
  foreach(_rel IN LISTS GB_PROTOS)
    set(_proto ${PROJECT_SOURCE_DIR}/${_rel})
    string(REGEX REPLACE "\\.proto$" "" _stem ${_out}/${_rel})
    add_custom_command(
      OUTPUT ${_stem}.pb.cc ${_stem}.pb.h
      COMMAND ${CMAKE_COMMAND} -E make_directory ${_out}
      COMMAND ${Protobuf_PROTOC_EXECUTABLE} -I${PROJECT_SOURCE_DIR} -I${Protobuf_INCLUDE_DIRS} --cpp_out=${_out} ${_proto}
      DEPENDS ${_proto} ${Protobuf_PROTOC_EXECUTABLE}
      COMMENT "protoc ${_rel}"
      VERBATIM)
    list(APPEND _generated ${_stem}.pb.cc ${_stem}.pb.h)
  endforeach()
  add_library(${name} STATIC ${_generated})
  target_include_directories(${name} SYSTEM PUBLIC ${_out})
  target_link_libraries(${name} PUBLIC protobuf::libprotobuf)
endfunction()

# gb_add_grpc_proto_library(NAME PROTO a/b.proto DEPS proto_lib ...): gb_add_proto_library for a
# .proto with a service: the messages (protoc --cpp_out) and the gRPC stubs and service bases
# (grpc_cpp_plugin: a/b.grpc.pb.h) in one static library linking gRPC::grpc++. A .proto it
# imports is compiled by its own proto library, named in DEPS, so that each file's descriptors
# exist once in a binary. Needs find_package(gRPC CONFIG) (Debian libgrpc++-dev).
function(gb_add_grpc_proto_library name)
  cmake_parse_arguments(GB "" "PROTO" "DEPS" ${ARGN})
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/${name}_gen)
  set(_proto ${PROJECT_SOURCE_DIR}/${GB_PROTO})
  string(REGEX REPLACE "\\.proto$" "" _stem ${_out}/${GB_PROTO})
  set(_generated ${_stem}.pb.cc ${_stem}.pb.h ${_stem}.grpc.pb.cc ${_stem}.grpc.pb.h)
  add_custom_command(
    OUTPUT ${_generated}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_out}
    COMMAND ${Protobuf_PROTOC_EXECUTABLE} -I${PROJECT_SOURCE_DIR} -I${Protobuf_INCLUDE_DIRS} --cpp_out=${_out}
            --grpc_out=${_out} --plugin=protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin> ${_proto}
    DEPENDS ${_proto} ${Protobuf_PROTOC_EXECUTABLE} gRPC::grpc_cpp_plugin
    COMMENT "protoc + grpc_cpp_plugin ${GB_PROTO}"
    VERBATIM)
  add_library(${name} STATIC ${_generated})
  target_include_directories(${name} SYSTEM PUBLIC ${_out})
  target_link_libraries(${name} PUBLIC ${GB_DEPS} gRPC::grpc++ protobuf::libprotobuf)
endfunction()
