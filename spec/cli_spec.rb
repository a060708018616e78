# The command line: -v, -h, -t, and how config errors are reported
# (FILE:LINE: message, exit 1), with and without -t.
require_relative 'spec_helper'

RSpec.describe 'gateway command line' do
  let(:good_config) do
    <<~RUBY
      server listen: #{free_port} do
        location "/" do
          "ok"
        end
      end
    RUBY
  end

  it '-v prints a version line starting with "gateway/" and exits 0' do
    r = run_gateway('-v')
    expect(r.exitstatus).to eq(0), r.output
    expect(r.output.lines.first).to match(%r{\Agateway/\S+})
  end

  it '-h prints usage naming every option and exits 0' do
    r = run_gateway('-h')
    expect(r.exitstatus).to eq(0), r.output
    %w[-f -t -v -h --trace].each do |opt|
      expect(r.output).to match(/(^|\s)#{Regexp.escape(opt)}\b/), "usage lacks #{opt}:\n#{r.output}"
    end
  end

  it 'an unknown option prints usage to stderr and exits 2 (a usage error, as getopt tools do; 1 is a config or runtime error)' do
    r = run_gateway('--no-such-option')
    expect(r.exitstatus).to eq(2), r.output
    expect(r.stderr).to match(/usage/i)
    expect(r.stderr).to include('-f')
  end

  it '-t -f FILE says the syntax is ok and exits 0 for a good config' do
    status, output, path = check_config(good_config)
    expect(status).to eq(0), output
    expect(output).to match(/syntax is ok/)
  end

  it '-t -f FILE reports a Ruby syntax error as FILE:LINE: message and exits 1' do
    status, output, path = check_config(<<~RUBY)
      server listen: #{free_port} do
        x = 1
        location "/" do |req| ) end
      end
    RUBY
    expect(status).to eq(1), output
    expect(output).to match(/^#{Regexp.escape(path)}:3:\S* .*syntax error/), output
  end

  it '-t -f FILE reports a bad listen value as FILE:LINE: message and exits 1' do
    status, output, path = check_config(<<~RUBY)
      # a comment
      server listen: "nope" do
        location "/" do
          "x"
        end
      end
    RUBY
    expect(status).to eq(1), output
    expect(output).to match(/^#{Regexp.escape(path)}:2: \S/), output
    expect(output).to match(/listen/), output
  end

  it '-t -f FILE reports an undefined method as FILE:LINE: message and exits 1' do
    status, output, path = check_config(<<~RUBY)
      server listen: #{free_port} do
        location "/" do "x" end
        no_such_directive 42
      end
    RUBY
    expect(status).to eq(1), output
    expect(output).to match(/^#{Regexp.escape(path)}:3: .*no_such_directive/), output
  end

  it '-t -f reports a missing file and exits 1' do
    path = File.join(spec_dir, 'missing.rb')
    r = run_gateway('-t', '-f', path)
    expect(r.exitstatus).to eq(1), r.output
    expect(r.output).to include(path)
  end

  it '-f FILE with a bad config exits 1 with FILE:LINE: message instead of serving' do
    port = free_port
    path = write_config(<<~RUBY)
      server listen: #{port} do
        location "/" do "x" end
        no_such_directive 42
      end
    RUBY
    r = run_gateway('-f', path)
    expect(r.exitstatus).to eq(1), r.output
    expect(r.output).to match(/^#{Regexp.escape(path)}:3: .*no_such_directive/), r.output
    expect(port_open?(port)).to be(false)
  end
end
