# frozen_string_literal: true

# A headless Chromium driven over the DevTools protocol on a pipe
# (--remote-debugging-pipe: JSON messages, NUL-terminated, on fds 3 and 4),
# so a page runs in real time (no virtual time budget) for as long as the
# caller waits, and its DOM, script errors and a screenshot can be read.
# Used by spec/dashboard_spec.rb and `rake lesson`.
#
#   Chromium.open(profile_dir) do |c|
#     c.goto(url, width: 1280, height: 1000)
#     sleep 3                      # the page polls meanwhile
#     c.dom                        # => "<html>..."
#     c.errors                     # => uncaught exceptions and console errors
#     c.screenshot('x.png')        # the whole page
#   end
require 'base64'
require 'io/nonblock'
require 'json'
require 'timeout'

class Chromium
  FLAGS = %w[--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
             --disable-component-update --disable-sync --hide-scrollbars --remote-debugging-pipe].freeze

  def self.binary
    %w[chromium chromium-browser].find { |c| system("command -v #{c} >/dev/null 2>&1") } or
      raise 'chromium is not installed (./setup.sh installs it)'
  end

  def self.open(profile)
    c = new(profile)
    begin
      yield c
    ensure
      c.close
    end
  end

  attr_reader :errors

  def initialize(profile)
    to_chrome_r, @to_chrome = IO.pipe
    @from_chrome, from_chrome_w = IO.pipe
    # Ruby makes its pipes non-blocking; Chromium takes EAGAIN for the end.
    to_chrome_r.nonblock = false
    from_chrome_w.nonblock = false
    @pid = Process.spawn(self.class.binary, *FLAGS, "--user-data-dir=#{profile}", 'about:blank',
                         3 => to_chrome_r, 4 => from_chrome_w, out: File::NULL, err: File::NULL)
    to_chrome_r.close
    from_chrome_w.close
    @id = 0
    @replies = {}
    @errors = []
    @lock = Mutex.new
    @cond = ConditionVariable.new
    @reader = Thread.new { read_loop }
  end

  def goto(url, width: 1280, height: 1000)
    target = call('Target.createTarget', { url: 'about:blank' })['targetId']
    @session = call('Target.attachToTarget', { targetId: target, flatten: true })['sessionId']
    call('Runtime.enable', {}, @session)
    call('Page.enable', {}, @session)
    call('Emulation.setDeviceMetricsOverride', { width: width, height: height, deviceScaleFactor: 1, mobile: false },
         @session)
    call('Page.navigate', { url: url }, @session)
  end

  # A JavaScript expression's value in the page.
  def eval(expr)
    r = call('Runtime.evaluate', { expression: expr, returnByValue: true, awaitPromise: true }, @session)
    raise "page script failed: #{r['exceptionDetails']}" if r['exceptionDetails']

    r.dig('result', 'value')
  end

  def dom
    eval('document.documentElement.outerHTML')
  end

  # The whole page (not only the window) as a PNG file.
  def screenshot(path)
    r = call('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true }, @session)
    File.binwrite(path, Base64.decode64(r['data']))
  end

  def close
    return unless @pid

    begin
      send_msg(id: (@id += 1), method: 'Browser.close')
      Timeout.timeout(5) { Process.wait(@pid) }
    rescue StandardError
      Process.kill('KILL', @pid)
      Process.wait(@pid)
    end
    @pid = nil
    @to_chrome.close unless @to_chrome.closed?
    @reader.join(2)
  end

  private

  def send_msg(msg)
    @to_chrome.write(JSON.generate(msg) + "\0")
    @to_chrome.flush
  end

  def call(method, params = {}, session = nil, timeout: 20)
    id = @lock.synchronize { @id += 1 }
    msg = { id: id, method: method, params: params }
    msg[:sessionId] = session if session
    send_msg(msg)
    deadline = Time.now + timeout
    @lock.synchronize do
      until @replies.key?(id)
        left = deadline - Time.now
        raise "chromium: no answer to #{method} in #{timeout} s" if left <= 0

        @cond.wait(@lock, left)
      end
      r = @replies.delete(id)
      raise "chromium: #{method}: #{r['error']['message']}" if r['error']

      r['result']
    end
  end

  def read_loop
    buf = +''
    while (chunk = @from_chrome.readpartial(65_536) rescue nil)
      buf << chunk
      while (i = buf.index("\0"))
        msg = JSON.parse(buf.slice!(0, i + 1).chop)
        if msg['id']
          @lock.synchronize do
            @replies[msg['id']] = msg
            @cond.broadcast
          end
        elsif msg['method'] == 'Runtime.exceptionThrown'
          d = msg.dig('params', 'exceptionDetails')
          @errors << "#{d.dig('exception', 'description') || d['text']} (line #{d['lineNumber']})"
        elsif msg['method'] == 'Runtime.consoleAPICalled' && msg.dig('params', 'type') == 'error'
          @errors << "console.error: #{msg.dig('params', 'args').map { |a| a['value'] || a['description'] }.join(' ')}"
        end
      end
    end
  end
end
