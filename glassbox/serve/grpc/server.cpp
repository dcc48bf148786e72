// GrpcServer: builds the grpc::Server (limits, keep-alive, the listening port) around
// InferenceService and shuts it down with a deadline; see server.h.
#include "glassbox/serve/grpc/server.h"

#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "glassbox/base/error.h"
#include "glassbox/serve/grpc/service.h"

namespace glassbox::serve {

struct GrpcServer::Impl {
  Impl(Engine& e, GrpcOptions o) : engine(e), options(std::move(o)), service(engine, options) {}
  Engine& engine;
  GrpcOptions options;
  InferenceService service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  bool started = false;
  bool stopped = false;
};

GrpcServer::GrpcServer(Engine& engine, GrpcOptions options) {
  options.validate();
  impl_ = std::make_unique<Impl>(engine, std::move(options));
}

GrpcServer::~GrpcServer() { stop(); }

void GrpcServer::start() {
  const GrpcOptions& o = impl_->options;
  GB_CHECK(!impl_->started, FailedPrecondition, "the gRPC server was started already", std::string());
  GB_CHECK(o.enabled(), FailedPrecondition, "the gRPC server is off (port -1)", std::string("pass --grpc-port PORT"));
  impl_->started = true;
  const std::string host = o.address.find(':') != std::string::npos ? "[" + o.address + "]" : o.address;
  const std::string where = host + ":" + std::to_string(o.port);

  grpc::ServerBuilder b;
  b.AddListeningPort(where, grpc::InsecureServerCredentials(), &impl_->port);
  b.RegisterService(&impl_->service);
  b.SetMaxReceiveMessageSize(o.max_receive_bytes);
  b.SetMaxSendMessageSize(o.max_send_bytes);
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(o.keepalive_time.count()));
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(o.keepalive_timeout.count()));
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, o.keepalive_permit_without_calls ? 1 : 0);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, o.http2_max_pings_without_data);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                       static_cast<int>(o.http2_min_ping_interval.count()));
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, o.http2_max_ping_strikes);
  impl_->server = b.BuildAndStart();
  if (!impl_->server || impl_->port == 0) {
    if (impl_->server) impl_->server->Shutdown();
    impl_->server.reset();
    throw Error(ErrorCode::kUnavailable,
                "cannot listen for gRPC on " + where + " (port " + std::to_string(o.port) +
                    " is in use, or the address is not one of this machine's)",
                "pass another --grpc-port (0: any free port, -1: no gRPC) or --address");
  }
}

int GrpcServer::port() const { return impl_->port; }

void GrpcServer::stop() { stop(impl_->options.stop_grace); }

void GrpcServer::stop(std::chrono::milliseconds grace) {
  if (!impl_->server || impl_->stopped) return;
  impl_->stopped = true;
  impl_->server->Shutdown(std::chrono::system_clock::now() + grace);
  impl_->server->Wait();
}

}  // namespace glassbox::serve
