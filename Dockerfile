# Builds the herald binary (worker, migrator, emulator) into a small Debian image.
ARG SWIFT_IMAGE=swift:6.3-bookworm
FROM ${SWIFT_IMAGE} AS build
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        libpq-dev libcurl4-openssl-dev libssl-dev libnghttp2-dev libhttp-parser-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Plugins Plugins
COPY Sources Sources
COPY Tests Tests
COPY migrations migrations
RUN swift build -c release --product herald --static-swift-stdlib \
    && install -D "$(swift build -c release --show-bin-path)/herald" /out/herald

FROM debian:bookworm-slim
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        libpq5 libcurl4 libssl3 libnghttp2-14 libhttp-parser2.9 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home /var/lib/herald --create-home herald
COPY --from=build /out/herald /usr/local/bin/herald
USER herald
WORKDIR /var/lib/herald
ENTRYPOINT ["herald"]
CMD ["work"]
