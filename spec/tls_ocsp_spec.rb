# OCSP stapling from a file (`tls: { cert:, key:, ocsp: }`): a test CA made
# here signs the site's certificate, `openssl ocsp` answers for it from an
# index.txt (-respout), and `openssl s_client -status` checks what the
# gateway staples; per SNI certificate, re-read on reload, bad files are
# FILE:LINE errors.
require_relative 'spec_helper'
require 'open3'

RSpec.describe 'TLS OCSP stapling' do
  def sh(*cmd)
    out, st = Open3.capture2e(*cmd, chdir: spec_dir)
    raise "#{cmd.join(' ')} failed: #{out}" unless st.success?
    out
  end

  # The CA once per example (ca.pem, ca.key).
  def make_ca
    sh('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
       '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=Spec Test CA',
       '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature')
  end

  # BASE.pem / BASE.key for `name`, signed by the CA with `serial` (hex).
  def make_leaf(base, name, serial)
    sh('openssl', 'req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', "#{base}.key",
       '-out', "#{base}.csr", '-subj', "/CN=#{name}")
    File.write(File.join(spec_dir, "#{base}.ext"), "subjectAltName=DNS:#{name}\n")
    sh('openssl', 'x509', '-req', '-in', "#{base}.csr", '-CA', 'ca.pem', '-CAkey', 'ca.key', '-set_serial', "0x#{serial}",
       '-days', '2', '-out', "#{base}.pem", '-extfile', "#{base}.ext")
  end

  # BASE.ocsp.der: the CA's OCSP answer for BASE.pem, good or revoked
  # (index.txt: V valid, R revoked; the expiry is YYMMDDHHMMSSZ).
  def make_ocsp(base, serial, name, status: :good)
    expiry = (Time.now.utc + 2 * 86_400).strftime('%y%m%d%H%M%SZ')
    line = if status == :good
             "V\t#{expiry}\t\t#{serial}\tunknown\t/CN=#{name}\n"
           else
             "R\t#{expiry}\t#{Time.now.utc.strftime('%y%m%d%H%M%SZ')}\t#{serial}\tunknown\t/CN=#{name}\n"
           end
    File.write(File.join(spec_dir, "#{base}.index.txt"), line)
    sh('openssl', 'ocsp', '-issuer', 'ca.pem', '-cert', "#{base}.pem", '-reqout', "#{base}.req.der", '-no_nonce')
    sh('openssl', 'ocsp', '-index', "#{base}.index.txt", '-rsigner', 'ca.pem', '-rkey', 'ca.key', '-CA', 'ca.pem',
       '-reqin', "#{base}.req.der", '-respout', "#{base}.ocsp.der.tmp", '-ndays', '1')
    File.rename(File.join(spec_dir, "#{base}.ocsp.der.tmp"), File.join(spec_dir, "#{base}.ocsp.der"))
  end

  # What `openssl s_client` says about the handshake (-status: asks for the staple).
  def s_client(name, status: true, version: nil)
    args = ['openssl', 's_client', '-connect', "127.0.0.1:#{@port}", '-servername', name, '-CAfile',
            File.join(spec_dir, 'ca.pem')]
    args << '-status' if status
    args << version if version
    out, = Open3.capture2e(*args, stdin_data: '')
    out
  end

  def start(tls)
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      server listen: "127.0.0.1:#{@port}", tls: #{tls} do
        location "/" do "x" end
      end
    RUBY
  end

  before(:each) do
    make_ca
    make_leaf('site', 'localhost', '1001')
    make_ocsp('site', '1001', 'localhost')
  end

  it 'staples the response when the client asks (TLS 1.3 and 1.2), and only then' do
    start(%({ cert: "site.pem", key: "site.key", ocsp: "site.ocsp.der" }))
    [nil, '-tls1_2'].each do |v|
      out = s_client('localhost', version: v)
      expect(out).to include('OCSP Response Status: successful', 'Cert Status: good', 'Verify return code: 0 (ok)')
      expect(out).to include('Serial Number: 1001')
    end
    expect(s_client('localhost', status: false)).not_to include('OCSP')
  end

  it 'staples per certificate: the SNI one has its own, the default none' do
    make_leaf('other', 'other.test', '2002')
    make_ocsp('other', '2002', 'other.test')
    start(%([{ cert: "site.pem", key: "site.key" }, { server_name: "other.test", cert: "other.pem", key: "other.key", ocsp: "other.ocsp.der" }]))
    other = s_client('other.test')
    expect(other).to include('Cert Status: good', 'Serial Number: 2002')
    expect(s_client('localhost')).to include('OCSP response: no response sent')
  end

  it 're-reads the file on reload' do
    start(%({ cert: "site.pem", key: "site.key", ocsp: "site.ocsp.der" }))
    expect(s_client('localhost')).to include('Cert Status: good')
    make_ocsp('site', '1001', 'localhost', status: :revoked)
    @gw.signal('HUP')
    poll('the new OCSP response', timeout: 10, interval: 0.2) { s_client('localhost').include?('Cert Status: revoked') }
  end

  it 'a missing or bad OCSP file is a FILE:LINE: error' do
    File.write(File.join(spec_dir, 'junk.der'), "not DER\n")
    status, out, path = check_config(<<~RUBY)
      # line 1
      server listen: 18998, tls: { cert: "site.pem", key: "site.key", ocsp: "junk.der" } do
        location "/" do "x" end
      end
    RUBY
    expect(status).to eq(1)
    expect(out).to match(/#{Regexp.escape(path)}:2: server listen 18998: tls ocsp .*junk\.der: not a DER OCSP response/)
    status, out, path = check_config(%(server listen: 18998, tls: { cert: "site.pem", key: "site.key", ocsp: "none.der" } do location "/" do "x" end end))
    expect(status).to eq(1)
    expect(out).to match(/#{Regexp.escape(path)}:1: .*tls ocsp .*none\.der: No such file/)
    status, out, = check_config(%(server listen: 18998, tls: { cert: "site.pem", key: "site.key", ocsp: 5 } do location "/" do "x" end end))
    expect(status).to eq(1)
    expect(out).to include('tls: ocsp: must be a file path')
  end
end
