# The TensorBoard event writer: generates C++ from proto/*.proto into gb_tb_proto, a static
# library of its own (generated code is not held to our -Werror warnings, and its headers are
# SYSTEM includes), and tells glassbox/inspect/CMakeLists.txt what to add:
#   GB_TB_SOURCES   our sources for gb_inspect
#   GB_TB_TESTS     our sources for inspect_test
#   GB_TB_EXTERNAL  what gb_inspect links (gb_tb_proto, which brings protobuf::libprotobuf)
find_package(Protobuf REQUIRED GLOBAL)

# The torch wheel ships its own, older protobuf headers in torch/include/google/protobuf, and
# LibTorch's include directories come first on every target that links gb_torch. Targets of
# this directory therefore see the system protobuf's headers first, through a directory that
# holds nothing but a link to them (-isystem /usr/include itself would break #include_next).
# The LibTorch headers glassbox includes (the precompiled <torch/torch.h>) use no protobuf.
set(_gb_tb_pb_include ${CMAKE_CURRENT_BINARY_DIR}/protobuf_include)
file(MAKE_DIRECTORY ${_gb_tb_pb_include})
file(CREATE_LINK ${Protobuf_INCLUDE_DIR}/google ${_gb_tb_pb_include}/google SYMBOLIC)
include_directories(BEFORE SYSTEM ${_gb_tb_pb_include})

set(_gb_tb_protos event hparams)
set(_gb_tb_out ${CMAKE_CURRENT_BINARY_DIR}/tb_proto)
set(_gb_tb_generated "")
foreach(_name IN LISTS _gb_tb_protos)
  set(_proto ${CMAKE_CURRENT_SOURCE_DIR}/proto/${_name}.proto)
  set(_stem ${_gb_tb_out}/glassbox/inspect/proto/${_name})
  add_custom_command(
    OUTPUT ${_stem}.pb.cc ${_stem}.pb.h
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_gb_tb_out}
    COMMAND ${Protobuf_PROTOC_EXECUTABLE} -I${PROJECT_SOURCE_DIR} -I${Protobuf_INCLUDE_DIRS}
            --cpp_out=${_gb_tb_out} ${_proto}
    DEPENDS ${_proto} ${Protobuf_PROTOC_EXECUTABLE}
    COMMENT "protoc glassbox/inspect/proto/${_name}.proto"
    VERBATIM)
  list(APPEND _gb_tb_generated ${_stem}.pb.cc ${_stem}.pb.h)
endforeach()

add_library(gb_tb_proto STATIC ${_gb_tb_generated})
target_include_directories(gb_tb_proto SYSTEM PUBLIC ${_gb_tb_out})
target_link_libraries(gb_tb_proto PUBLIC protobuf::libprotobuf)

set(GB_TB_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/tensorboard.cpp)
set(GB_TB_TESTS ${CMAKE_CURRENT_SOURCE_DIR}/tensorboard_test.cpp)
set(GB_TB_EXTERNAL gb_tb_proto)
