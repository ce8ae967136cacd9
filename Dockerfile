# tierd image for compose.yml and compose.kafka.yml.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/tierd ./cmd/tierd

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/tierd /usr/local/bin/tierd
ENTRYPOINT ["/usr/local/bin/tierd"]
