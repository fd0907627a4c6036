# histd in a container: `docker build -t histd .`, then
#   docker run -d --name histd -p 8125:8125/udp -p 8125:8125/tcp \
#     -p 127.0.0.1:8126:8126 -p 127.0.0.1:8127:8127 -v histd-data:/var/lib/histd histd
# Reload the config (mounted over /etc/histd/config.js) with `docker kill --signal=HUP histd`.

# The build: the workspace's locked dependencies, histd alone, optimised.
FROM rust:1-bookworm AS build
WORKDIR /src
# librdkafka (the Kafka client) is built from its sources by its configure script: the image has
# what that needs (a C compiler, make, pkg-config, OpenSSL's and zlib's headers and OpenSSL's
# static libraries, which .cargo/config.toml links into the binary).
COPY Cargo.toml Cargo.lock rustfmt.toml ./
COPY .cargo .cargo
COPY crates crates
RUN cargo build --release --locked -p histd \
 && strip target/release/histd

# The image: Debian's glibc as the build's, the binary, a config, a user of its own.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
RUN useradd --system --user-group --home-dir /var/lib/histd --create-home --shell /usr/sbin/nologin histd
COPY --from=build /src/target/release/histd /usr/bin/histd
COPY packaging/docker/config.js /etc/histd/config.js
USER histd
VOLUME /var/lib/histd
# statsd (UDP and TCP), management, HTTP (web page, /health, /metrics, the query API).
EXPOSE 8125/udp 8125/tcp 8126/tcp 8127/tcp
STOPSIGNAL SIGTERM
# The config in force says where and how to ask: its HTTP port, https with http.tls, a read token.
HEALTHCHECK --interval=30s --timeout=5s CMD ["/usr/bin/histd", "health", "--config", "/etc/histd/config.js"]
ENTRYPOINT ["/usr/bin/histd"]
CMD ["run", "--config", "/etc/histd/config.js"]
