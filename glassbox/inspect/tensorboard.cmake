# The TensorBoard event writer: generates C++ from proto/*.proto into gb_tb_proto (see
# cmake/GlassboxProtobuf.cmake) and tells glassbox/inspect/CMakeLists.txt what to add:
#   GB_TB_SOURCES   our sources for gb_inspect
#   GB_TB_TESTS     our sources for inspect_test
#   GB_TB_EXTERNAL  what gb_inspect links (gb_tb_proto, which brings protobuf::libprotobuf)
gb_use_system_protobuf()
gb_add_proto_library(gb_tb_proto PROTOS glassbox/inspect/proto/event.proto glassbox/inspect/proto/hparams.proto)

set(GB_TB_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/tensorboard.cpp)
set(GB_TB_TESTS ${CMAKE_CURRENT_SOURCE_DIR}/tensorboard_test.cpp)
set(GB_TB_EXTERNAL gb_tb_proto)
