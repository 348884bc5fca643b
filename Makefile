# firehose — see README.md. Every target builds what it needs.
CARGO ?= cargo
BIN := target/release/firehose

.PHONY: build demo test bench lint clean deps install

# The Debian packages every target uses (one list: mk/deps); installs them as root.
deps:
	@sh mk/deps all

build:
	$(CARGO) build --release --locked

# A short climb of the server profiles on loopback (server on CPU 0, client on CPU 1).
demo: build
	@sh mk/deps demo
	$(BIN) bench --repetitions 1 --duration 2

# The test suite (root-only tests skip with a reason when not root).
test:
	@sh mk/deps test
	$(CARGO) test --workspace --locked

# The engine benchmark: 3 interleaved repetitions per cell, medians (min-max).
bench: build
	@sh mk/deps bench
	$(BIN) bench --repetitions 3 --duration 5 --json-file bench.json

# The binary, its man pages and shell completions under $(DESTDIR)$(PREFIX).
PREFIX ?= /usr/local
SHARE = $(DESTDIR)$(PREFIX)/share
install: build
	install -Dm755 $(BIN) $(DESTDIR)$(PREFIX)/bin/firehose
	mkdir -p $(SHARE)/man/man1 $(SHARE)/bash-completion/completions \
		$(SHARE)/zsh/site-functions $(SHARE)/fish/vendor_completions.d
	$(BIN) man --dir $(SHARE)/man/man1
	$(BIN) completions bash > $(SHARE)/bash-completion/completions/firehose
	$(BIN) completions zsh > $(SHARE)/zsh/site-functions/_firehose
	$(BIN) completions fish > $(SHARE)/fish/vendor_completions.d/firehose.fish

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

clean:
	$(CARGO) clean

include mk/lab.mk
